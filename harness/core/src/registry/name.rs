//! What a tool name may be: code calls tools by name, so a name is a short identifier.

/// Longest tool name accepted.
pub const MAX_TOOL_NAME_LEN: usize = 128;

pub(super) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.chars().count() > MAX_TOOL_NAME_LEN {
        return Err(format!("it is longer than {MAX_TOOL_NAME_LEN} characters"));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_.-".contains(*c)))
    {
        return Err(format!("it contains {bad:?}"));
    }
    if name.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err("it starts with a digit or a dot".into());
    }
    Ok(())
}
