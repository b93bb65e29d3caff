//! The model gateway (`cordon serve --upstream API=URL`) driven by the official `anthropic`
//! SDK: `tests/e2e/gateway_anthropic.py` starts the stand-in model server
//! (`tests/e2e/standin_model.py`, the upstream, on 127.0.0.1) and then a `cordon serve`
//! pointed at it, so the stand-in is up before the server; the script stops the server on
//! every way out (and the kernel sends it SIGTERM if the script is killed). Each test names
//! one scenario and the upstream's API; the client speaks Anthropic Messages, or, through
//! `tests/e2e/gateway_openai.py` and the official `openai` SDK, Chat Completions and Responses.

/// Runs one scenario of `gateway_anthropic.py` against an upstream speaking `api`.
fn scenario(name: &str, api: &str) {
    crate::e2e_script(
        "gateway_anthropic.py",
        &[name, "--cordon", crate::cordon_bin(), "--upstream-api", api],
    );
}

#[test]
fn standin_model_shapes_validate_against_the_sdk_types() {
    crate::e2e_script("standin_model.py", &[]);
}

// --- client tools, errors, credentials (Anthropic upstream unless named)

#[test]
fn gateway_parallel_client_tools_round_trip_created_and_streamed() {
    scenario("parallel_client_tools", "anthropic");
}

#[test]
fn gateway_parallel_client_tools_through_an_openai_chat_upstream() {
    scenario("parallel_client_tools", "openai-chat");
}

#[test]
fn gateway_parallel_client_tools_through_an_openai_responses_upstream() {
    scenario("parallel_client_tools", "openai-responses");
}

#[test]
fn gateway_tool_result_is_error_reaches_the_upstream() {
    scenario("is_error", "anthropic");
}

#[test]
fn gateway_tool_choice_reaches_the_upstream_in_its_own_terms() {
    for api in ["anthropic", "openai-chat", "openai-responses"] {
        scenario("tool_choice", api);
    }
}

#[test]
fn gateway_unknown_or_missing_tool_use_id_is_400_and_the_upstream_sees_nothing() {
    scenario("pairing_errors", "anthropic");
}

#[test]
fn gateway_upstream_errors_keep_their_status_and_type() {
    scenario("upstream_error", "anthropic");
    scenario("upstream_error", "openai-chat");
}

#[test]
fn gateway_upstream_down_is_502() {
    scenario("upstream_down", "anthropic");
}

#[test]
fn gateway_upstream_timeout_is_504() {
    scenario("upstream_timeout", "anthropic");
}

#[test]
fn gateway_error_responses_carry_the_conversation_id() {
    scenario("error_headers", "anthropic");
    scenario("error_headers_bad_body", "anthropic");
}

#[test]
fn gateway_forwards_the_client_key_or_uses_upstream_key_env() {
    scenario("credentials", "anthropic");
    scenario("credentials", "openai-chat");
}

// --- operator server tools (`--tools FILE`)

#[test]
fn gateway_server_tools_run_inline_and_the_client_sees_only_the_answer() {
    scenario("server_tool_inline", "anthropic");
    scenario("server_tool_inline", "openai-chat");
}

#[test]
fn gateway_ask_server_tool_granted_and_denied_with_cordon_approval() {
    scenario("ask_approval", "anthropic");
}

#[test]
fn gateway_invalid_server_tool_input_goes_back_as_is_error_and_the_model_retries() {
    scenario("validation_retry", "anthropic");
}

#[test]
fn gateway_tool_round_cap_ends_the_turn_and_says_so() {
    scenario("loop_cap", "anthropic");
}

// --- programmatic tool calling

#[test]
fn gateway_ptc_batch_of_two_client_calls_suspends_and_resumes_in_its_container() {
    for api in ["anthropic", "openai-chat", "openai-responses"] {
        scenario("ptc_batch", api);
    }
}

#[test]
fn gateway_ptc_batch_answered_by_an_async_client_with_gather() {
    scenario("ptc_asyncio_gather_client", "anthropic");
}

#[test]
fn gateway_ptc_unknown_and_expired_containers_are_400() {
    scenario("ptc_container_errors", "anthropic");
}

#[test]
fn gateway_ptc_repl_state_persists_in_a_container() {
    scenario("ptc_repl_state", "anthropic");
}

// --- computer use and conversations

#[test]
fn gateway_computer_tool_runs_on_a_bound_computer_with_a_gate() {
    for api in ["anthropic", "openai-chat", "openai-responses"] {
        scenario("computer", api);
    }
}

#[test]
fn gateway_computer_and_browser_toolsets_act_on_a_real_page_and_refuse_disabled_actions() {
    scenario("computer_toolsets", "anthropic");
}

#[test]
fn gateway_computer_header_with_a_url_opens_a_computer() {
    scenario("computer_url", "anthropic");
}

#[test]
fn gateway_conversation_record_shows_turns_calls_and_results() {
    scenario("conversations", "anthropic");
}

// --- the OpenAI endpoints, driven by the official `openai` SDK

/// Runs one scenario of `gateway_openai.py` against an upstream speaking `api`.
fn openai_scenario(name: &str, api: &str) {
    crate::e2e_script(
        "gateway_openai.py",
        &[name, "--cordon", crate::cordon_bin(), "--upstream-api", api],
    );
}

#[test]
fn gateway_chat_completions_client_tools_round_trip_through_every_upstream() {
    for api in ["anthropic", "openai-chat", "openai-responses"] {
        openai_scenario("chat_tools", api);
    }
}

#[test]
fn gateway_responses_function_calls_round_trip_through_every_upstream() {
    for api in ["anthropic", "openai-chat", "openai-responses"] {
        openai_scenario("responses_tools", api);
    }
}

#[test]
fn gateway_responses_previous_response_id_continues_a_kept_conversation() {
    openai_scenario("responses_previous_response_id", "anthropic");
    openai_scenario("responses_previous_response_id", "openai-responses");
}

#[test]
fn gateway_responses_programmatic_tool_calling_in_openai_terms() {
    openai_scenario("responses_ptc", "anthropic");
    openai_scenario("responses_ptc", "openai-chat");
}

#[test]
fn gateway_responses_javascript_programs_suspend_and_resume_through_every_upstream() {
    for api in ["anthropic", "openai-chat", "openai-responses"] {
        openai_scenario("responses_ptc_javascript", api);
    }
}

#[test]
fn gateway_chat_completions_tool_choice_reaches_the_upstream() {
    openai_scenario("chat_tool_choice", "anthropic");
    openai_scenario("chat_tool_choice", "openai-chat");
}

#[test]
fn gateway_openai_clients_get_openai_shaped_errors_before_anything_runs() {
    openai_scenario("chat_errors", "anthropic");
    openai_scenario("responses_errors", "openai-responses");
}

#[test]
fn gateway_chat_completions_clients_get_server_tools_run_inline() {
    openai_scenario("chat_server_tools", "openai-chat");
}

#[test]
fn gateway_hosted_tools_reach_their_own_api_and_are_a_400_naming_them_elsewhere() {
    for api in ["anthropic", "openai-chat", "openai-responses"] {
        openai_scenario("hosted_tools", api);
    }
}

// --- the session protocol, driven by an SSE client (`httpx`)

fn session_scenario(name: &str, api: &str) {
    crate::e2e_script(
        "session_protocol.py",
        &[name, "--cordon", crate::cordon_bin(), "--upstream-api", api],
    );
}

#[test]
fn session_parallel_calls_of_every_kind_answered_in_one_post_across_client_and_server_restarts() {
    session_scenario("parallel", "anthropic");
    session_scenario("parallel", "openai-responses");
}

#[test]
fn session_code_execution_keeps_state_and_bad_requests_apply_nothing() {
    session_scenario("code_and_errors", "openai-chat");
}

#[test]
fn session_idle_past_its_ttl_is_gone() {
    session_scenario("expiry", "anthropic");
}

// --- the Gemini endpoints, driven by the official `google-genai` SDK

/// Runs one scenario of `gateway_gemini.py` against an upstream speaking `api`.
fn gemini_scenario(name: &str, api: &str) {
    crate::e2e_script(
        "gateway_gemini.py",
        &[name, "--cordon", crate::cordon_bin(), "--upstream-api", api],
    );
}

#[test]
fn standin_gemini_shapes_validate_against_the_sdk_types() {
    crate::e2e_script("standin_gemini.py", &[]);
}

#[test]
fn gateway_gemini_function_calling_round_trips_through_every_upstream() {
    for api in ["gemini", "anthropic", "openai-chat", "openai-responses"] {
        gemini_scenario("function_calling", api);
    }
}

#[test]
fn gateway_gemini_streams_round_trip_through_every_upstream() {
    for api in ["gemini", "anthropic", "openai-chat", "openai-responses"] {
        gemini_scenario("streaming", api);
    }
}

#[test]
fn gateway_gemini_clients_get_googles_errors_with_their_status() {
    gemini_scenario("errors", "gemini");
    gemini_scenario("errors", "anthropic");
}

#[test]
fn gateway_gemini_computer_use_runs_on_a_bound_computer_with_a_safety_approval() {
    gemini_scenario("computer", "gemini");
}
