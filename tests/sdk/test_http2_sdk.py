#!/usr/bin/env python3
"""The official `openai` Python SDK over HTTP/2: cleartext with prior knowledge (h2c) and TLS
(ALPN), through its own HTTP client (`httpx2`, with the `h2` package) made with `http2=True`.

    python tests/sdk/test_http2_sdk.py TARGET_DIR MODEL_DIR [h2c|tls]

For TLS the test makes a self-signed certificate for 127.0.0.1 with the `openssl` CLI. Each
case checks the protocol the SDK's responses actually came over, one-shot and streamed
answers token for token, and an error raised as the right exception class."""
import os, ssl, subprocess, sys, tempfile

import httpx2
import openai

from harness import Stack

TEXT = "HTTP/2 works: every token arrives, even 日本語 and emoji 🙂."


def self_signed(work):
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


def check(client, version):
    raw = client.chat.completions.with_raw_response.create(
        model="sdk-model", messages=[{"role": "user", "content": "hi"}], max_tokens=64)
    assert raw.http_response.http_version == version, raw.http_response.http_version
    assert raw.parse().choices[0].message.content == TEXT, raw.parse()
    chunks = client.chat.completions.create(
        model="sdk-model", messages=[{"role": "user", "content": "hi"}], max_tokens=64, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == TEXT, text
    try:
        client.chat.completions.create(model="sdk-model", messages=[], max_tokens=-1)
        raise AssertionError("no error for max_tokens=-1")
    except openai.BadRequestError as e:
        assert e.status_code == 400


def main():
    target, model_dir = sys.argv[1], sys.argv[2]
    only = sys.argv[3] if len(sys.argv) > 3 else None
    print(f"openai SDK {openai.__version__}, httpx2 {httpx2.__version__}")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="sg-h2-sdk-") as work:
        cert, key = self_signed(work)
        tls = ["--tls-cert-path", cert, "--tls-key-path", key]
        context = ssl.create_default_context(cafile=cert)
        # (name, gateway flags, CA file, the SDK's HTTP client, the version its answers must come over)
        cases = [
            ("h2c (prior knowledge)", [], None, lambda: httpx2.Client(http1=False, http2=True), "HTTP/2"),
            ("TLS, ALPN h2", tls, cert, lambda: httpx2.Client(http2=True, verify=context), "HTTP/2"),
            ("TLS, ALPN http/1.1", tls, cert, lambda: httpx2.Client(verify=context), "HTTP/1.1"),
        ]
        cases = [c for c in cases if only is None or (only == "tls") == (c[2] is not None)]
        for i, (name, flags, ca, http_client, version) in enumerate(cases):
            with Stack(target, model_dir, os.path.join(work, str(i)), TEXT, gateway_args=flags, ca_file=ca) as s:
                client = openai.OpenAI(base_url=s.base_url, api_key="unused", max_retries=0, http_client=http_client())
                try:
                    check(client, version)
                    print(f"ok   {name}")
                except Exception as e:  # noqa: BLE001 - report and continue
                    failures += 1
                    print(f"FAIL {name}: {type(e).__name__}: {e}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
