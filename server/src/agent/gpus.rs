//! GPU discovery: `nvidia-smi --query-gpu` when asked for `auto`.

use crate::ServerError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpus {
    pub count: u32,
    pub model: String,
}

/// Parses `--gpus`: a count, or `auto` to ask `nvidia-smi`.
pub async fn discover(spec: &str) -> Result<Gpus, ServerError> {
    if spec.trim() == "auto" {
        let output = tokio::process::Command::new("nvidia-smi")
            .args(["--query-gpu=index,name,uuid", "--format=csv,noheader"])
            .output()
            .await
            .map_err(|e| {
                ServerError::Config(format!(
                    "--gpus auto needs nvidia-smi, which could not run ({e}); pass --gpus N"
                ))
            })?;
        if !output.status.success() {
            return Err(ServerError::Config(format!(
                "nvidia-smi failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        return parse_nvidia_smi(&String::from_utf8_lossy(&output.stdout));
    }
    let count: u32 = spec.trim().parse().map_err(|_| {
        ServerError::invalid(
            "gpus",
            format!("--gpus takes a number or auto, not \"{spec}\""),
        )
    })?;
    if count == 0 || count > 64 {
        return Err(ServerError::invalid(
            "gpus",
            "--gpus must be between 1 and 64",
        ));
    }
    Ok(Gpus {
        count,
        model: "simulated".into(),
    })
}

/// `0, NVIDIA H200, GPU-…` lines → count and the (first) model.
pub fn parse_nvidia_smi(text: &str) -> Result<Gpus, ServerError> {
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').map(str::trim).collect())
        .collect();
    if rows.is_empty() {
        return Err(ServerError::Config("nvidia-smi listed no GPUs".into()));
    }
    let model = rows[0].get(1).copied().unwrap_or("unknown").to_string();
    Ok(Gpus {
        count: rows.len() as u32,
        model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_output_gives_the_count_and_model() {
        let text = "0, NVIDIA H200, GPU-aaa\n1, NVIDIA H200, GPU-bbb\n";
        assert_eq!(
            parse_nvidia_smi(text).unwrap(),
            Gpus {
                count: 2,
                model: "NVIDIA H200".into()
            }
        );
        assert!(parse_nvidia_smi("\n").is_err());
    }

    #[tokio::test]
    async fn a_count_is_taken_as_simulated_gpus() {
        assert_eq!(discover("4").await.unwrap().count, 4);
        assert!(discover("0").await.is_err());
        assert!(discover("lots").await.is_err());
    }
}
