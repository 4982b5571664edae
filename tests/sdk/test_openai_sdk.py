#!/usr/bin/env python3
"""The official `openai` Python SDK against shardgate (+ shardgate-sim, scripted).

    python tests/sdk/test_openai_sdk.py TARGET_DIR MODEL_DIR

Starts the simulator and the gateway from TARGET_DIR (release binaries), then checks that the
SDK streams every token, reads non-streamed answers and usage, raises the right exception
classes for 400/404, and raises APIError for an error event mid-stream."""
import os, sys, tempfile

import openai

from harness import Stack

TEXT = "Streaming works: every token arrives, even 日本語 and emoji 🙂."


def main():
    target, model_dir = sys.argv[1], sys.argv[2]
    print(f"openai SDK {openai.__version__}")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="sg-sdk-") as work:
        with Stack(target, model_dir, os.path.join(work, "ok"), TEXT) as stack:
            client = openai.OpenAI(base_url=stack.base_url, api_key="unused", max_retries=0)
            for name, fn in TESTS:
                try:
                    fn(client)
                    print(f"ok   {name}")
                except Exception as e:  # noqa: BLE001 - report and continue
                    failures += 1
                    print(f"FAIL {name}: {type(e).__name__}: {e}")
            try:
                metrics_parse_with_prometheus_client(stack.metrics_url)
                print("ok   metrics_parse_with_prometheus_client")
            except Exception as e:  # noqa: BLE001
                failures += 1
                print(f"FAIL metrics_parse_with_prometheus_client: {type(e).__name__}: {e}")
        # A stream whose engine dies mid-way: the SDK raises APIError from the error event.
        with Stack(target, model_dir, os.path.join(work, "die"), TEXT * 50,
                   sim_args=["--fault", "die@2", "--itl-ms", "20"]) as stack:
            client = openai.OpenAI(base_url=stack.base_url, api_key="unused", max_retries=0)
            try:
                stream_error_raises(client)
                print("ok   stream_error_raises")
            except Exception as e:  # noqa: BLE001
                failures += 1
                print(f"FAIL stream_error_raises: {type(e).__name__}: {e}")
    print(f"{len(TESTS) + 2 - failures}/{len(TESTS) + 2} SDK checks passed")
    sys.exit(1 if failures else 0)


def metrics_parse_with_prometheus_client(url):
    """The exposition parses with Prometheus' own Python parser and counts what ran."""
    import urllib.request
    from prometheus_client.parser import text_string_to_metric_families
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in ("smg_router_requests", "smg_router_ttft_seconds", "smg_router_tokens", "smg_worker_health",
                 "smg_worker_requests_active", "smg_http_responses", "shardgate_tokenizer_cache_hits"):
        assert name in families, f"missing family {name}: {sorted(families)}"
    requests = sum(s.value for s in families["smg_router_requests"].samples if s.name.endswith("_total"))
    assert requests >= 5, requests  # two chats streamed, one not, two completions
    health = [s for s in families["smg_worker_health"].samples if s.labels.get("connection_mode") == "zmq"]
    assert health and all(s.value == 1 for s in health), health
    ttft = [s for s in families["smg_router_ttft_seconds"].samples if s.name.endswith("_count") and s.labels["endpoint"] == "chat"]
    assert ttft and ttft[0].value >= 2, ttft


def chat_stream_sees_every_token(client):
    stream = client.chat.completions.create(model="sdk-model", messages=[{"role": "user", "content": "hi"}], stream=True)
    pieces, finish = [], []
    for chunk in stream:
        for c in chunk.choices:
            if c.delta.content:
                pieces.append(c.delta.content)
            if c.finish_reason:
                finish.append(c.finish_reason)
    assert "".join(pieces) == TEXT, "".join(pieces)
    assert len(pieces) > 5, pieces
    assert finish == ["stop"], finish


def chat_stream_usage(client):
    stream = client.chat.completions.create(model="sdk-model", messages=[{"role": "user", "content": "hi"}],
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0, chunks[-1]


def chat_non_stream(client):
    r = client.chat.completions.create(model="sdk-model", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content == TEXT
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def completions(client):
    r = client.completions.create(model="sdk-model", prompt="Say it", max_tokens=5)
    assert r.choices[0].finish_reason == "length", r
    text = "".join(c.choices[0].text for c in client.completions.create(model="sdk-model", prompt="Say it",
                                                                         max_tokens=5, stream=True))
    assert text == r.choices[0].text, (text, r.choices[0].text)


def models(client):
    assert [m.id for m in client.models.list()] == ["sdk-model"]


def errors_map_to_sdk_exceptions(client):
    try:
        client.chat.completions.create(model="sdk-model", messages=[{"role": "user", "content": "x"}], top_p=2.0)
        raise AssertionError("no exception")
    except openai.BadRequestError as e:
        assert e.status_code == 400 and "top_p" in str(e), e
    try:
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
        raise AssertionError("no exception")
    except openai.NotFoundError as e:
        assert e.status_code == 404, e


def stream_error_raises(client):
    client.chat.completions.create(model="sdk-model", messages=[{"role": "user", "content": "warm"}], max_tokens=2)
    stream = client.chat.completions.create(model="sdk-model", messages=[{"role": "user", "content": "hi"}],
                                            stream=True, max_tokens=2000)
    seen = 0
    try:
        for _ in stream:
            seen += 1
            if seen == 3:
                # Trigger the engine's death with another request while this stream runs.
                try:
                    client.completions.create(model="sdk-model", prompt="x", max_tokens=2)
                except openai.APIError:
                    pass
        raise AssertionError("stream ended without an error")
    except openai.APIError as e:
        assert "engine" in str(e).lower(), e


TESTS = [(f.__name__, f) for f in (chat_stream_sees_every_token, chat_stream_usage, chat_non_stream, completions, models,
                                  errors_map_to_sdk_exceptions)]

if __name__ == "__main__":
    main()
