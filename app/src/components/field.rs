//! Pieces of accessible forms.

use crate::error::AppError;
use leptos::prelude::*;

/// The error text of one field, tied to its input by `id` (use it in the input's
/// `aria-describedby`). Renders nothing while there is no error for `field`.
#[component]
pub fn FieldError(
    /// The id the input points at with `aria-describedby`.
    id: &'static str,
    /// The server function's field name.
    field: &'static str,
    /// The latest result of the form's action.
    error: Signal<Option<AppError>>,
) -> impl IntoView {
    let message = move || error.get().and_then(|e| e.for_field(field));
    view! {
        <p id=id class="field-error" role="alert" hidden=move || message().is_none()>
            {message}
        </p>
    }
}

/// A banner for an error that belongs to no single field.
#[component]
pub fn FormError(error: Signal<Option<AppError>>) -> impl IntoView {
    let message = move || {
        error
            .get()
            .filter(|e| !e.is_field_error())
            .map(|e| e.to_string())
    };
    view! {
        <p class="form-error" role="alert" hidden=move || message().is_none()>
            {message}
        </p>
    }
}
