-- Why an admin changed the scheduler's settings, shown in the Settings page's history.
alter table setting_change add column reason text;
