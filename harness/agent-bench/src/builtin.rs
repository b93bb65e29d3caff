//! The built-in suite: web tasks written for Cordon (forms, dialogs, scrolling,
//! autocomplete, drag), with the scripts the scripted policy plays, compiled into the binary
//! so `cordon bench --suite builtin` runs offline. Positions in the pages are fixed in CSS
//! pixels so the scripts hit at DPR 1 and 2.

/// Every file of the suite: `(path, bytes)`, paths relative to the suite root.
pub const FILES: &[(&str, &[u8])] = &[
    (
        "autocomplete/index.html",
        include_bytes!("builtin/autocomplete/index.html"),
    ),
    (
        "autocomplete/script.jsonl",
        include_bytes!("builtin/autocomplete/script.jsonl"),
    ),
    (
        "autocomplete/task.json",
        include_bytes!("builtin/autocomplete/task.json"),
    ),
    (
        "dialog/index.html",
        include_bytes!("builtin/dialog/index.html"),
    ),
    (
        "dialog/script.jsonl",
        include_bytes!("builtin/dialog/script.jsonl"),
    ),
    (
        "dialog/task.json",
        include_bytes!("builtin/dialog/task.json"),
    ),
    ("drag/index.html", include_bytes!("builtin/drag/index.html")),
    (
        "drag/script.jsonl",
        include_bytes!("builtin/drag/script.jsonl"),
    ),
    ("drag/task.json", include_bytes!("builtin/drag/task.json")),
    ("form/index.html", include_bytes!("builtin/form/index.html")),
    (
        "form/script.jsonl",
        include_bytes!("builtin/form/script.jsonl"),
    ),
    ("form/task.json", include_bytes!("builtin/form/task.json")),
    (
        "scroll/index.html",
        include_bytes!("builtin/scroll/index.html"),
    ),
    (
        "scroll/script.jsonl",
        include_bytes!("builtin/scroll/script.jsonl"),
    ),
    (
        "scroll/task.json",
        include_bytes!("builtin/scroll/task.json"),
    ),
];

/// A file of the suite.
pub fn file(path: &str) -> Option<&'static [u8]> {
    FILES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, bytes)| *bytes)
}
