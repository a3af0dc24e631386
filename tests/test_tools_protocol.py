"""The action protocol: parse_action never raises, round-trips every valid call, and names each error."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda_gym.errors import ToolError
from cuda_gym.tools import (
    MAX_ACTION_CHARS,
    TOOLS,
    ParseError,
    ToolCall,
    format_tool_call,
    from_openai_tool_call,
    parse_action,
    to_openai_tool_call,
    tool_schemas,
)
from cuda_gym.tools.schema import MAX_CONTENT_CHARS

TRICKY = [
    "</tool_call>", "<tool_call>", '{"name": "bash", "arguments": {}}', "```json\n", "```", "<think>",
    "</think>", "\\", '"', "\\n", "\n", "\t", "\u2028", "\x00", "\U0001f680", "\u00e9", "{", "}",
]

tricky_text = st.lists(st.one_of(st.text(max_size=20), st.sampled_from(TRICKY)), max_size=6).map("".join)


def value_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A hypothesis strategy of values valid under ``schema`` (the subset the tool schemas use)."""
    kind = schema["type"]
    if kind == "string":
        return tricky_text.filter(lambda s: schema.get("minLength", 0) <= len(s) <= schema.get("maxLength", 10**9))
    if kind == "integer":
        return st.integers(schema.get("minimum", -(10**6)), schema.get("maximum", 10**6))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(value_for(schema["items"]), min_size=schema.get("minItems", 0), max_size=3)
    if kind == "object":
        props = schema["properties"]
        required = schema.get("required", [])
        optional = [k for k in props if k not in required]

        @st.composite
        def build(draw: st.DrawFn) -> dict[str, Any]:
            chosen = required + [k for k in optional if draw(st.booleans())]
            return {k: draw(value_for(props[k])) for k in chosen}

        return build()
    raise AssertionError(f"no strategy for {schema}")


tool_calls = st.sampled_from(list(TOOLS)).flatmap(
    lambda name: value_for(TOOLS[name].parameters).map(lambda args: ToolCall(name, args)))

prose = st.text(max_size=60).filter(lambda s: "<tool_call>" not in s and not s.lstrip().startswith("<think>"))


# --- never raises ---------------------------------------------------------------------------------

@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), tricky_text, st.binary(), st.binary().map(lambda b: b.decode("latin-1"))))
def test_parse_action_never_raises_on_text(text: Any) -> None:
    result = parse_action(text)
    assert isinstance(result, (ToolCall, ParseError))
    if isinstance(result, ParseError):
        assert result.message


@settings(max_examples=200)
@given(st.lists(st.sampled_from(["<tool_call>", "</tool_call>", "{", "}", "[", "]", '"name"', '"arguments"', ":",
                                 ",", '"bash"', '"compile"', '"command"', '"ls"', " ", "\n", "```", "<think>",
                                 "</think>", "null", "1e999", '"'], ), max_size=40).map("".join))
def test_parse_action_never_raises_on_nested_tags(text: str) -> None:
    assert isinstance(parse_action(text), (ToolCall, ParseError))


@pytest.mark.parametrize("value", [None, 0, 1.5, [], {}, {"name": 3}, object(), ("compile",), bytearray(b"{}")])
def test_parse_action_never_raises_on_other_types(value: Any) -> None:
    assert isinstance(parse_action(value), (ToolCall, ParseError))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("text", [
    "[" * 200_000,
    '{"name":' * 30_000,
    "<tool_call>" * 23_000,
    "<tool_call>{" * 20_000,
    '<tool_call>{"name": "bash", "arguments": {"command": "' + "a" * 250_000,
    "x" * (MAX_ACTION_CHARS + 1),
    '{"a":' * 50_000 + "1" + "}" * 50_000,
])
def test_parse_action_huge_inputs(text: str) -> None:
    result = parse_action(text)
    assert isinstance(result, ParseError)


# --- round trips ------------------------------------------------------------------------------------

@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(tool_calls, prose, prose)
def test_round_trip_hermes(call: ToolCall, before: str, after: str) -> None:
    text = format_tool_call(call.name, call.arguments)
    assert parse_action(text) == call
    assert parse_action(before + "\n" + text + "\n" + after) == call


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(tool_calls)
def test_round_trip_openai(call: ToolCall) -> None:
    oa = to_openai_tool_call(call)
    assert oa["type"] == "function" and isinstance(oa["function"]["arguments"], str)
    assert from_openai_tool_call(oa) == call
    assert from_openai_tool_call(json.loads(json.dumps(oa))) == call
    # An agent that writes the OpenAI form, or a bare object with string arguments, is understood too.
    assert parse_action(json.dumps(oa)) == call
    assert parse_action(json.dumps({"name": call.name, "arguments": oa["function"]["arguments"]})) == call


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(tool_calls)
def test_round_trip_bare_and_fenced(call: ToolCall) -> None:
    payload = json.dumps({"name": call.name, "arguments": call.arguments})
    assert parse_action(payload) == call
    assert parse_action(f"```json\n{payload}\n```") == call


def test_accepted_forms() -> None:
    want = ToolCall("bash", {"command": "ls -la"})
    forms = [
        '<tool_call>{"name": "bash", "arguments": {"command": "ls -la"}}</tool_call>',
        'Let me look.\n<tool_call>\n  {"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>\nok',
        '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n',  # missing closing tag at the end
        '<tool_call>\n```json\n{"name": "bash", "arguments": {"command": "ls -la"}}\n```\n</tool_call>',
        '{"name": "bash", "arguments": "{\\"command\\": \\"ls -la\\"}"}',
        'I will run: {"name": "bash", "arguments": {"command": "ls -la"}}',
        '<think>I could call <tool_call>{"name":"compile"}</tool_call></think>\n'
        '<tool_call>{"name": "bash", "arguments": {"command": "ls -la"}}</tool_call>',
        '{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\\"command\\": \\"ls -la\\"}"}}',
        b'<tool_call>{"name": "bash", "arguments": {"command": "ls -la"}}</tool_call>',
        {"name": "bash", "arguments": {"command": "ls -la"}},
    ]
    for form in forms:
        assert parse_action(form) == want, form
    # A literal newline inside a JSON string (invalid strict JSON) is accepted: LLMs write it.
    assert parse_action('{"name": "write_file", "arguments": {"path": "a", "content": "x\ny"}}') == ToolCall(
        "write_file", {"path": "a", "content": "x\ny"})
    assert parse_action('{"name": "compile"}') == ToolCall("compile", {})
    assert parse_action('{"name": "compile", "arguments": null}') == ToolCall("compile", {})
    assert parse_action('{"name": "compile", "arguments": ""}') == ToolCall("compile", {})
    # Integral floats are normalised where an integer is expected.
    assert parse_action('{"name": "bash", "arguments": {"command": "x", "timeout": 5.0}}').arguments["timeout"] == 5


# --- each error -------------------------------------------------------------------------------------

def _err(text: Any) -> ParseError:
    result = parse_action(text)
    assert isinstance(result, ParseError), result
    return result


def test_error_empty() -> None:
    for text in ["", "   \n\t", "<think>only thoughts</think>"]:
        assert "empty" in _err(text).message


def test_error_not_json_gives_position() -> None:
    msg = _err('<tool_call>{"name": "bash", "arguments": {"command": "ls"}</tool_call>').message
    assert "not valid JSON" in msg and "line 1 column" in msg and "<tool_call>" in msg
    msg = _err('{"name": "bash", "arguments": {"command": "ls"').message
    assert "not valid JSON" in msg and "char" in msg


def test_error_no_call() -> None:
    assert "no tool call" in _err("I think I should compile now.").message


def test_error_unknown_tool_lists_tools() -> None:
    err = _err('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>')
    assert "unknown tool 'rm_rf'" in err.message
    for name in TOOLS:
        assert name in err.message


def test_error_missing_argument() -> None:
    err = _err('<tool_call>{"name": "write_file", "arguments": {"path": "a.cu"}}</tool_call>')
    assert "missing required argument 'content'" in err.message and "write_file(path: string" in err.message
    assert err.tool == "write_file"


def test_error_extra_argument() -> None:
    err = _err('{"name": "read_file", "arguments": {"path": "a", "lines": 5}}')
    assert "unexpected argument 'lines'" in err.message and "start_line" in err.message


def test_error_wrong_types() -> None:
    assert "'command' must be a string, got integer" in _err('{"name":"bash","arguments":{"command":3}}').message
    assert "'timeout' must be an integer, got string" in _err(
        '{"name":"bash","arguments":{"command":"x","timeout":"9"}}').message
    assert "'timeout' must be an integer, got boolean" in _err(
        '{"name":"bash","arguments":{"command":"x","timeout":true}}').message
    assert "'start_line' must be >= 1" in _err('{"name":"read_file","arguments":{"path":"a","start_line":0}}').message
    assert "'timeout' must be <= 600" in _err('{"name":"bash","arguments":{"command":"x","timeout":601}}').message
    assert "'replace_all' must be true or false" in _err(
        '{"name":"edit_file","arguments":{"path":"a","old_string":"x","new_string":"y","replace_all":"yes"}}').message
    assert "'edits' must have at least 1" in _err('{"name":"multi_edit","arguments":{"path":"a","edits":[]}}').message
    assert "'edits'[0] must be an object" in _err('{"name":"multi_edit","arguments":{"path":"a","edits":[1]}}').message
    assert "'path' must not be empty" in _err('{"name":"read_file","arguments":{"path":""}}').message
    assert '"arguments" must be a JSON object' in _err('{"name":"bash","arguments":[1]}').message
    assert '"arguments" is a string but not valid JSON' in _err('{"name":"bash","arguments":"{command"}').message
    assert 'no "name"' in _err('<tool_call>{"arguments": {}}</tool_call>').message
    assert "unexpected key 'args'" in _err('<tool_call>{"name": "compile", "args": {}}</tool_call>').message
    assert "must be a JSON object" in _err("<tool_call>[1, 2]</tool_call>").message


def test_error_two_calls() -> None:
    two = format_tool_call("compile") + "\n" + format_tool_call("verify")
    assert "found 2 tool calls" in _err(two).message
    assert "found 2 tool calls" in _err('{"name": "compile"} and then {"name": "verify"}').message
    assert "JSON array" in _err('[{"name": "compile"}, {"name": "verify"}]').message


def test_error_sizes() -> None:
    assert "at most 262144" in _err("a" * (MAX_ACTION_CHARS + 1)).message
    big = json.dumps({"name": "write_file", "arguments": {"path": "a", "content": "x" * (MAX_CONTENT_CHARS + 1)}})
    assert "'content' has 200001 characters; at most 200000" in _err(big).message


def test_error_text_after_json_inside_tags() -> None:
    msg = _err('<tool_call>{"name": "compile"} trailing words').message
    assert "expected </tool_call>" in msg


def test_error_not_text() -> None:
    assert "must be text, got int" in _err(42).message


# --- schemas and the caller API ---------------------------------------------------------------------

def test_tool_schemas_are_openai_functions() -> None:
    schemas = tool_schemas()
    assert [s["function"]["name"] for s in schemas] == list(TOOLS)
    expected = {"bash", "read_file", "write_file", "edit_file", "multi_edit", "glob", "grep", "compile", "verify",
                "profile", "submit"}
    assert set(TOOLS) == expected
    for s in schemas:
        assert s["type"] == "function"
        fn = s["function"]
        assert len(fn["description"]) > 40
        params = fn["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
        for prop in params["properties"].values():
            assert prop.get("description")
    json.dumps(schemas)  # serialisable
    # Callers get copies: mutating them does not change the catalogue.
    schemas[0]["function"]["parameters"]["properties"].clear()
    assert tool_schemas(["bash"])[0]["function"]["parameters"]["properties"]


def test_tool_schemas_subset_and_unknown() -> None:
    assert [s["function"]["name"] for s in tool_schemas(["submit", "bash"])] == ["submit", "bash"]
    with pytest.raises(ToolError, match="unknown tool 'nope'"):
        tool_schemas(["nope"])


def test_from_openai_rejects_bad_input() -> None:
    with pytest.raises(ToolError, match="expected a dict"):
        from_openai_tool_call("compile")
    with pytest.raises(ToolError, match="unknown tool"):
        from_openai_tool_call({"type": "function", "function": {"name": "nope", "arguments": "{}"}})
    with pytest.raises(ToolError, match="missing required argument 'command'"):
        from_openai_tool_call({"type": "function", "function": {"name": "bash", "arguments": "{}"}})


def test_to_openai_ids() -> None:
    call = ToolCall("compile", {})
    assert to_openai_tool_call(call, "abc")["id"] == "abc"
    assert to_openai_tool_call(call)["id"] == to_openai_tool_call(call)["id"]
    assert to_openai_tool_call(call)["id"] != to_openai_tool_call(ToolCall("verify", {}))["id"]


def test_lone_surrogates_in_arguments_are_parse_errors() -> None:
    # JSON's "\ud800" decodes to a lone surrogate, which no file, path or command can hold
    # (the sandbox's command encoding raised UnicodeEncodeError: an "internal error" observation).
    for name, args in [("bash", '{"command": "echo \\ud800"}'), ("write_file", '{"path": "a", "content": "x\\udfff"}'),
                       ("grep", '{"pattern": "\\udc80"}'),
                       ("multi_edit", '{"path": "a", "edits": [{"old_string": "a", "new_string": "\\ud800"}]}')]:
        result = parse_action(f'{{"name": "{name}", "arguments": {args}}}')
        assert isinstance(result, ParseError) and result.tool == name
        assert "holds a lone surrogate" in result.message
    pair = parse_action('{"name": "bash", "arguments": {"command": "echo \\ud83d\\ude80"}}')
    assert isinstance(pair, ToolCall) and pair.arguments["command"] == "echo \U0001f680"
