//! The gateway's streamed replies driven by the official SDKs streaming
//! (`tests/e2e/gateway_streaming.py`): `anthropic` `messages.stream`, `openai` Chat
//! Completions and Responses with `stream=True`, each through an upstream in every API.
//! The stand-in holds its stream after its first text piece until the client saw it.

/// Runs one scenario of `gateway_streaming.py` against an upstream speaking each API.
fn every_upstream(name: &str) {
    for api in ["anthropic", "openai-chat", "openai-responses"] {
        crate::e2e_script(
            "gateway_streaming.py",
            &[name, "--cordon", crate::cordon_bin(), "--upstream-api", api],
        );
    }
}

#[test]
fn gateway_streams_anthropic_messages_token_by_token_from_every_upstream() {
    every_upstream("anthropic_messages_stream");
}

#[test]
fn gateway_streams_chat_completions_chunk_by_chunk_from_every_upstream() {
    every_upstream("chat_completions_stream");
}

#[test]
fn gateway_streams_responses_events_from_every_upstream() {
    every_upstream("responses_stream");
}

#[test]
fn gateway_stream_failing_before_its_first_byte_keeps_its_status() {
    crate::e2e_script(
        "gateway_streaming.py",
        &[
            "upstream_failure_before_the_first_byte_keeps_its_status",
            "--cordon",
            crate::cordon_bin(),
        ],
    );
}
