//! Answering the file choosers a page opens: with the session's upload files, or not at
//! all; either way the model is told in the step's text.

use super::cdp::cdp;
use super::session::BrowserSession;
use crate::error::Result;
use chromiumoxide::cdp::browser_protocol::dom::SetFileInputFilesParams;

impl BrowserSession {
    /// Answers the file choosers the page opened: with the session's upload files, or not
    /// at all (the input stays empty). Either way the model is told in the step's text.
    pub(super) async fn answer_file_choosers(&mut self) -> Result<()> {
        for (input, multiple) in std::mem::take(&mut self.net.choosers) {
            let Some(input) = input.filter(|_| !self.uploads.is_empty()) else {
                self.notes.push(if self.uploads.is_empty() {
                    "A file chooser opened and was refused: this session allows no uploads."
                        .to_owned()
                } else {
                    "A file chooser opened without a file input to fill; nothing was uploaded."
                        .to_owned()
                });
                continue;
            };
            let count = if multiple { self.uploads.len() } else { 1 };
            let chosen = &self.uploads[..count];
            let mut params = SetFileInputFilesParams::new(
                chosen.iter().map(|p| p.display().to_string()).collect(),
            );
            params.backend_node_id = Some(input);
            self.page.execute(params).await.map_err(cdp)?;
            let names: Vec<String> = chosen
                .iter()
                .map(|p| {
                    p.file_name().map_or_else(
                        || p.display().to_string(),
                        |n| n.to_string_lossy().into_owned(),
                    )
                })
                .collect();
            self.notes.push(format!(
                "A file chooser opened and was given: {}.",
                names.join(", ")
            ));
        }
        Ok(())
    }
}
