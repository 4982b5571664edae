#!/usr/bin/env python3
"""Soak test: shardgate + shardgate-sim under steady load with rotating engine faults.

perf/soak/run.sh builds the binaries and calls this; see perf/soak/README.md. Standard library
only. One asyncio process drives the load (raw HTTP/1.1 over keep-alive sockets, so every byte
of every response is checked), supervises the simulator and samples the gateway.

Phases:
  1. start the gateway and a fault-free simulator; wait until the worker is ready;
  2. ramp: closed-loop concurrency steps measure saturation (completions/s);
  3. soak for --minutes at --load (default 0.8) x saturation, open loop (arrivals do not wait
     for answers, so a failing engine cannot slow the offered load down); every cycle the
     simulator is killed and restarted with the next fault of die, die-silent, stall, deaf,
     garbage, armed to fire 30-60% into the cycle; --outage-seconds after it fires (or at the
     cycle's end) the simulator is killed and the next one starts, as a process supervisor
     would restart a crashed or hung engine;
  4. drain: stop sending, let answers arrive, kill a faulted simulator so nothing waits on it,
     restart a clean one, and check the gateway serves again;
  5. verdict: every request sent got a complete answer or an explicit error (an error
     envelope, or an error event followed by [DONE]); the worker's in-flight count is 0 in
     GET /workers and in smg_worker_requests_active; RSS after warm-up stays within 10%; the
     gateway holds no more file descriptors than before the soak; SIGTERM stops it cleanly.

Writes perf/soak/results/<UTC timestamp>.json and prints a summary; exits 1 on any violation.
"""

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAULTS = ["die", "die-silent", "stall", "deaf", "garbage"]
SAMPLE_EVERY_S = 10.0
MODEL_NAME = "qwen3-demo"


# ---------------------------------------------------------------------------------------------
# Processes


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    """The gateway and the current simulator, with their logs under `workdir`."""

    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir
        self.bin = Path(args.bin_dir)
        self.port = free_port()
        self.metrics_port = free_port()
        # ipc paths are limited to 107 bytes: keep the socket directory short.
        self.sockdir = Path(tempfile.mkdtemp(prefix="sg-soak-", dir="/tmp"))
        self.worker_url = f"ipc://{self.sockdir}/engine"
        self.model_dir = args.model_dir
        self.gateway = None
        self.sim = None
        self.sim_index = 0
        self.sim_started = []

    def start_gateway(self):
        cmd = [
            str(self.bin / "shardgate"), "launch",
            "--worker-urls", self.worker_url,
            "--model-path", self.model_dir,
            "--served-model-name", MODEL_NAME,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--metrics-host", "127.0.0.1",
            "--metrics-port", str(self.metrics_port),
            # A lost engine is re-bound a second later, so a restarted one reconnects at once.
            "--health-check-interval-secs", "1",
            "--log-level", self.args.gateway_log_level,
        ] + self.args.gateway_arg
        if self.args.shards:
            cmd += ["--shards", str(self.args.shards)]
        log = open(self.workdir / "gateway.log", "wb")
        self.gateway = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        return cmd

    def start_sim(self, fault=None, fault_at=None):
        self.sim_index += 1
        cmd = [
            str(self.bin / "shardgate-sim"),
            "--worker-url", self.worker_url,
            "--model-path", self.model_dir,
            "--itl-ms", str(self.args.sim_itl_ms),
            "--ttft-ms", str(self.args.sim_ttft_ms),
            "--output-len", str(self.args.sim_output_len),
            "--max-num-seqs", str(self.args.sim_max_num_seqs),
            "--seed", str(self.sim_index),
            "--log-level", "warn",
        ]
        if fault:
            cmd += ["--fault", f"{fault}@{fault_at}"]
        self.sim_log = self.workdir / f"sim-{self.sim_index:02d}-{fault or 'clean'}.log"
        log = open(self.sim_log, "wb")
        self.sim = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        self.sim_started.append({"index": self.sim_index, "fault": fault, "fault_at": fault_at, "t": time.time()})
        return self.sim

    def kill_sim(self):
        """SIGKILL, as a crashed engine process: the gateway must notice on its own."""
        if self.sim and self.sim.poll() is None:
            self.sim.kill()
        if self.sim:
            self.sim.wait()
            return self.sim.returncode
        return None

    def stop(self):
        self.kill_sim()
        if self.gateway and self.gateway.poll() is None:
            self.gateway.kill()
            self.gateway.wait()

    # -- observation ---------------------------------------------------------------------

    def http_get(self, path, port=None, timeout=5):
        url = f"http://127.0.0.1:{port or self.port}{path}"
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()

    def workers(self):
        try:
            _, body = self.http_get("/workers")
            return json.loads(body)["workers"]
        except Exception as e:  # noqa: BLE001 - a sample that failed is recorded as such
            return {"error": str(e)}

    def worker_status(self):
        ws = self.workers()
        if isinstance(ws, dict) or not ws:
            return None
        return ws[0].get("status")

    def in_flight(self):
        """(worker in_flight, [rank in_flight]) from GET /workers."""
        ws = self.workers()
        if isinstance(ws, dict) or not ws:
            return None, None
        load = ws[0].get("load", {})
        return load.get("in_flight"), [r.get("in_flight") for r in load.get("ranks", [])]

    def metrics_active(self):
        try:
            _, body = self.http_get("/metrics", port=self.metrics_port)
        except Exception:  # noqa: BLE001
            return None
        total = 0.0
        seen = False
        for line in body.decode().splitlines():
            if line.startswith("smg_worker_requests_active{"):
                total += float(line.rsplit(" ", 1)[1])
                seen = True
        return total if seen else None

    def proc_sample(self):
        pid = self.gateway.pid
        rss_kb = None
        threads = None
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss_kb = int(line.split()[1])
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except (FileNotFoundError, ProcessLookupError):
            return None
        return {"rss_kb": rss_kb, "fds": fds, "threads": threads}


async def wait_until(check, timeout, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await asyncio.to_thread(check):
            return True
        await asyncio.sleep(interval)
    return False


# ---------------------------------------------------------------------------------------------
# Requests


class Stats:
    def __init__(self):
        self.sent = 0
        self.completed = 0
        self.errors = 0  # explicit: an error envelope, or an error event then [DONE]
        self.client_aborted = 0  # this client hung up on purpose
        self.shed = 0  # not sent: too many outstanding (open loop backpressure)
        self.violations = []  # hung, lost, malformed
        self.by_kind = {}
        self.error_statuses = {}
        self.error_messages = {}
        self.latencies = []

    def count(self, kind, outcome):
        k = self.by_kind.setdefault(kind, {"completed": 0, "errors": 0, "client_aborted": 0, "violations": 0})
        k[outcome] += 1

    def as_dict(self):
        lat = sorted(self.latencies)
        pct = lambda p: round(lat[min(len(lat) - 1, int(p * len(lat)))], 4) if lat else None  # noqa: E731
        return {
            "sent": self.sent,
            "completed": self.completed,
            "errors": self.errors,
            "client_aborted": self.client_aborted,
            "shed_not_sent": self.shed,
            "violations": len(self.violations),
            "violation_samples": self.violations[:20],
            "by_kind": self.by_kind,
            "error_statuses": self.error_statuses,
            "error_messages_top": dict(sorted(self.error_messages.items(), key=lambda kv: -kv[1])[:10]),
            "latency_s": {"p50": pct(0.5), "p99": pct(0.99), "max": lat[-1] if lat else None},
        }


class Violation(Exception):
    pass


class StaleConnection(Exception):
    """A pooled keep-alive connection the server had closed before we wrote to it."""


class Pool:
    """Idle keep-alive connections to the gateway."""

    def __init__(self, port):
        self.port = port
        self.idle = []
        self.open = 0

    async def get(self):
        while self.idle:
            r, w = self.idle.pop()
            if not w.is_closing() and not r.at_eof():
                return r, w, True
            w.close()
        r, w = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 22)
        return r, w, False

    def put(self, r, w):
        if len(self.idle) < 512:
            self.idle.append((r, w))
        else:
            w.close()

    def close_all(self):
        for _, w in self.idle:
            w.close()
        self.idle.clear()


def make_request(rng, ramp=False):
    """(kind, path, body, stream, disconnect_after_events or None)."""
    chat = rng.random() < 0.6
    stream = rng.random() < 0.5
    max_tokens = rng.randint(4, 48)
    body = {"model": MODEL_NAME, "max_tokens": max_tokens, "stream": stream}
    if rng.random() < 0.1:
        body["n"] = 2
    if rng.random() < 0.1:
        body["stop"] = [rng.choice([" the", "\n", ".", "and"])]
    if stream and rng.random() < 0.3:
        body["stream_options"] = {"include_usage": True}
    words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "soak", "test"]) for _ in range(rng.randint(3, 40)))
    if chat:
        body["messages"] = [{"role": "user", "content": f"Say something about {words}."}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = f"Once upon a time {words}"
        path = "/v1/completions"
    disconnect = None
    if not ramp:
        if stream and rng.random() < 0.03:
            disconnect = ("events", rng.randint(1, 3))
        elif not stream and rng.random() < 0.01:
            disconnect = ("before_response", None)
    kind = f"{'chat' if chat else 'completion'}-{'stream' if stream else 'full'}"
    return kind, path, json.dumps(body).encode(), stream, disconnect


async def read_head(r):
    head = await r.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    if not m:
        raise Violation(f"bad status line {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return int(m.group(1)), headers


async def read_chunks(r):
    """Yields the data of each chunk of a chunked body; ends after the last chunk."""
    while True:
        size_line = await r.readuntil(b"\r\n")
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            await r.readuntil(b"\r\n")  # no trailers from the gateway
            return
        data = await r.readexactly(size)
        if await r.readexactly(2) != b"\r\n":
            raise Violation("chunk without CRLF")
        yield data


async def read_body(r, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        async for c in read_chunks(r):
            parts.append(c)
        return b"".join(parts)
    n = int(headers.get("content-length", "0"))
    return await r.readexactly(n)


def classify_full(status, body):
    """'completed' or 'errors' for a whole response; raises Violation otherwise."""
    try:
        obj = json.loads(body)
    except ValueError:
        raise Violation(f"status {status} with a body that is not JSON: {body[:120]!r}")
    if status == 200:
        choices = obj.get("choices")
        if not choices or any(c.get("finish_reason") in (None, "") for c in choices):
            raise Violation(f"200 without finished choices: {body[:200]!r}")
        return "completed", None
    err = obj.get("error") if isinstance(obj, dict) else None
    if not isinstance(err, dict) or "message" not in err:
        raise Violation(f"status {status} without an error envelope: {body[:200]!r}")
    return "errors", err.get("message", "")


async def stream_events(r, headers, disconnect_after):
    """Parses SSE; returns ('completed' | 'errors' | 'client_aborted', message)."""
    if headers.get("transfer-encoding", "").lower() != "chunked":
        raise Violation("stream without chunked framing")
    buf = b""
    events = 0
    finished = False
    error = None
    done = False
    async for chunk in read_chunks(r):
        buf += chunk
        while b"\n\n" in buf:
            raw, buf = buf.split(b"\n\n", 1)
            data_lines = [ln[5:].strip() for ln in raw.split(b"\n") if ln.startswith(b"data:")]
            if not data_lines:
                continue  # a keepalive comment
            data = b"\n".join(data_lines)
            if done:
                raise Violation(f"event after [DONE]: {data[:120]!r}")
            if data == b"[DONE]":
                done = True
                continue
            events += 1
            obj = json.loads(data)
            if "error" in obj:
                error = obj["error"].get("message", "") if isinstance(obj["error"], dict) else str(obj["error"])
            for c in obj.get("choices") or []:
                if c.get("finish_reason"):
                    finished = True
            if disconnect_after and events >= disconnect_after and not done:
                return "client_aborted", None
    if not done:
        raise Violation("stream ended without [DONE]")
    if buf.strip():
        raise Violation(f"bytes after the last event: {buf[:80]!r}")
    if error is not None:
        return "errors", error
    if not finished:
        raise Violation("[DONE] without a finish_reason or an error event")
    return "completed", None


async def one_request(pool, stats, rng, timeout_s, ramp=False):
    kind, path, body, stream, disconnect = make_request(rng, ramp)
    req = (
        f"POST {path} HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    started = time.monotonic()
    stats.sent += 1
    for attempt in range(2):
        r = w = None
        try:
            r, w, reused = await pool.get()
            w.write(req)
            await w.drain()
            if disconnect and disconnect[0] == "before_response":
                await asyncio.sleep(0.05)
                w.transport.abort()
                stats.client_aborted += 1
                stats.count(kind, "client_aborted")
                return "client_aborted"
            try:
                status, headers = await asyncio.wait_for(read_head(r), timeout_s)
            except asyncio.IncompleteReadError as e:
                if reused and not e.partial and attempt == 0:
                    raise StaleConnection() from None
                raise
            if stream and status == 200:
                outcome, message = await asyncio.wait_for(
                    stream_events(r, headers, disconnect[1] if disconnect else None),
                    timeout_s,
                )
                if outcome == "client_aborted":
                    w.transport.abort()
            else:
                resp = await asyncio.wait_for(read_body(r, headers), timeout_s)
                outcome, message = classify_full(status, resp)
                if status != 200:
                    stats.error_statuses[str(status)] = stats.error_statuses.get(str(status), 0) + 1
            if outcome == "errors":
                stats.errors += 1
                short = re.sub(r"[0-9a-f]{8,}", "…", (message or "")[:100])
                stats.error_messages[short] = stats.error_messages.get(short, 0) + 1
            elif outcome == "completed":
                stats.completed += 1
                stats.latencies.append(time.monotonic() - started)
            else:
                stats.client_aborted += 1
            stats.count(kind, outcome)
            if outcome != "client_aborted":
                if headers.get("connection", "").lower() == "close":
                    w.close()
                else:
                    pool.put(r, w)
            return outcome
        except StaleConnection:
            if w:
                w.close()
            continue
        except asyncio.TimeoutError:
            stats.violations.append({"kind": kind, "what": f"no complete answer within {timeout_s:.0f} s (hung)"})
        except (Violation, ValueError, KeyError) as e:
            stats.violations.append({"kind": kind, "what": f"malformed: {e}"})
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            stats.violations.append({"kind": kind, "what": f"connection lost without an answer: {type(e).__name__} {e}"})
        if w:
            w.transport.abort()
        stats.count(kind, "violations")
        return "violation"
    return "violation"


# ---------------------------------------------------------------------------------------------
# Phases


async def ramp(stack, args, log):
    """Closed loop at rising concurrency; saturation = the best completions/s."""
    rng = random.Random(1)
    steps = []
    best = 0.0
    flat = 0
    for conc in args.ramp_concurrency:
        pool = Pool(stack.port)
        stats = Stats()
        stop_at = time.monotonic() + args.ramp_step_seconds

        async def worker():
            while time.monotonic() < stop_at:
                await one_request(pool, stats, rng, 60, ramp=True)

        t0 = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(conc)))
        elapsed = time.monotonic() - t0
        pool.close_all()
        rate = stats.completed / elapsed
        steps.append({"concurrency": conc, "completed_per_s": round(rate, 1), "errors": stats.errors,
                      "violations": len(stats.violations)})
        log(f"ramp: concurrency {conc:4d} -> {rate:7.1f} completions/s ({stats.errors} errors)")
        if rate > best * 1.05:
            best = max(best, rate)
            flat = 0
        else:
            best = max(best, rate)
            flat += 1
            if flat >= 2:
                break
    return best, steps


async def soak(stack, args, rate, log):
    rng = random.Random(2)
    stats = Stats()
    pool = Pool(stack.port)
    samples = []
    cycles = []
    duration = args.minutes * 60
    cycle_s = args.cycle_seconds or max(30.0, min(180.0, duration / len(args.faults)))
    timeout_s = cycle_s + 90  # a stalled engine's requests wait for the cycle's kill at most
    outstanding = set()
    t_start = time.monotonic()
    end = t_start + duration

    async def sampler():
        while True:
            t = time.monotonic() - t_start
            proc = await asyncio.to_thread(stack.proc_sample)
            inflight, ranks = await asyncio.to_thread(stack.in_flight)
            samples.append({"t": round(t, 1), **(proc or {}), "in_flight": inflight, "rank_in_flight": ranks,
                            "outstanding": len(outstanding), "worker": await asyncio.to_thread(stack.worker_status)})
            await asyncio.sleep(SAMPLE_EVERY_S)

    async def faults():
        i = 0
        while time.monotonic() < end:
            cycle_end = min(end, time.monotonic() + cycle_s)
            fault = args.faults[(args.first_fault + i) % len(args.faults)]
            # Armed to fire 30-60% into the cycle (the simulator counts ADDs: about 1.1 per
            # request with n=2 mixed in).
            fault_at = max(1, int(rate * 1.1 * cycle_s * rng.uniform(0.3, 0.6)))
            t_cycle = time.monotonic() - t_start
            stack.kill_sim()
            # The gateway learns of a killed engine from its next liveness ping (1 s).
            noticed = await wait_until(lambda: stack.worker_status() != "ready", 15)
            noticed_after = round(time.monotonic() - t_start - t_cycle, 2)
            t_restart = time.monotonic()
            stack.start_sim(fault, fault_at)
            ready = await wait_until(lambda: stack.worker_status() == "ready", args.ready_timeout)
            ready_after = round(time.monotonic() - t_restart, 2)
            cycle = {"cycle": i, "fault": f"{fault}@{fault_at}", "t": round(t_cycle, 1),
                     "loss_noticed_after_kill_s": noticed_after if noticed else None,
                     "ready_after_restart_s": ready_after if ready else None}
            cycles.append(cycle)
            if ready:
                log(f"cycle {i}: simulator restarted with --fault {fault}@{fault_at}; worker ready after {ready_after}s")
            else:
                # Recorded as a violation; a second restart keeps the soak going.
                log(f"cycle {i}: worker NOT ready {args.ready_timeout:.0f}s after the restart "
                    f"(status {stack.worker_status()}); restarting the simulator once more")
                stack.kill_sim()
                await wait_until(lambda: stack.worker_status() != "ready", 15)
                t_second = time.monotonic()
                stack.start_sim(fault, fault_at)
                again = await wait_until(lambda: stack.worker_status() == "ready", args.ready_timeout)
                cycle["ready_after_second_restart_s"] = round(time.monotonic() - t_second, 2) if again else None
                log(f"cycle {i}: after a second restart the worker is {stack.worker_status()}")
            sim_log = stack.sim_log
            fired_at = None
            while time.monotonic() < cycle_end:
                await asyncio.sleep(0.5)
                now = time.monotonic()
                if fired_at is None and "fires at request" in sim_log.read_text(errors="replace"):
                    fired_at = now
                    cycle["fault_fired_s"] = round(now - t_start, 1)
                if fired_at is not None:
                    if "gateway_left_ready_after_fault_s" not in cycle and stack.worker_status() != "ready":
                        cycle["gateway_left_ready_after_fault_s"] = round(now - fired_at, 1)
                    # An outage of at most `outage_seconds`, then the engine is "restarted by
                    # its supervisor" (stall and deaf are never noticed by the gateway sooner
                    # than its 300 s silence watchdog).
                    if now - fired_at >= args.outage_seconds:
                        break
            cycle["worker_status_before_kill"] = await asyncio.to_thread(stack.worker_status)
            i += 1

    sampler_task = asyncio.create_task(sampler())
    faults_task = asyncio.create_task(faults())
    # Open loop: Poisson arrivals at `rate`, whatever the answers do.
    next_at = time.monotonic()
    while time.monotonic() < end:
        now = time.monotonic()
        if now < next_at:
            await asyncio.sleep(min(next_at - now, 0.05))
            continue
        next_at += rng.expovariate(rate)
        if len(outstanding) >= args.max_outstanding:
            stats.shed += 1
            continue
        task = asyncio.create_task(one_request(pool, stats, rng, timeout_s))
        outstanding.add(task)
        task.add_done_callback(outstanding.discard)
    log(f"soak: load stopped after {duration:.0f}s; {len(outstanding)} requests outstanding")
    await faults_task

    # Drain: answers still due; a faulted simulator that holds requests is killed so the
    # gateway fails them (its normal path for a lost engine), then a clean one starts.
    if outstanding:
        await asyncio.wait(outstanding, timeout=15)
    stack.kill_sim()
    if outstanding:
        await asyncio.wait(outstanding, timeout=timeout_s)
    pool.close_all()
    hung_at_end = len(outstanding)
    for task in list(outstanding):
        task.cancel()
        stats.violations.append({"kind": "?", "what": "still unanswered after the drain (hung)"})
    sampler_task.cancel()
    return stats, samples, cycles, cycle_s, hung_at_end


async def recovery(stack, log):
    """A clean simulator after the last fault: the worker must come back and serve."""
    # The faulted engine was just killed: until the gateway's next liveness ping (≤ 1 s) the
    # worker still reads "ready" on the dead connection. Wait for it to notice, as the cycles
    # do, or "ready" below would be the old connection's.
    await wait_until(lambda: stack.worker_status() != "ready", 15)
    stack.start_sim()
    ready = await wait_until(lambda: stack.worker_status() == "ready", 60)
    stats = Stats()
    pool = Pool(stack.port)
    rng = random.Random(3)
    if ready:
        await asyncio.gather(*(one_request(pool, stats, rng, 60, ramp=True) for _ in range(20)))
    pool.close_all()
    log(f"recovery: worker ready={ready}; {stats.completed}/20 completed, {stats.errors} errors")
    return {"ready": ready, "completed": stats.completed, "errors": stats.errors,
            "violations": stats.violations[:5]}


def rss_verdict(samples, warmup_s, tolerance):
    after = [s for s in samples if s.get("rss_kb") and s["t"] >= warmup_s]
    if len(after) < 4:
        return {"ok": None, "note": f"too few samples after the {warmup_s:.0f}s warm-up to judge"}
    quarter = max(1, len(after) // 4)
    base = statistics.median(s["rss_kb"] for s in after[:quarter])
    last = statistics.median(s["rss_kb"] for s in after[-quarter:])
    peak = max(s["rss_kb"] for s in after)
    growth = (last - base) / base
    return {"ok": growth <= tolerance, "baseline_kb": base, "final_kb": last, "peak_kb": peak,
            "growth": round(growth, 4), "tolerance": tolerance, "warmup_s": warmup_s}


async def main_async(args):
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    workdir = REPO / "target" / "soak" / stamp
    workdir.mkdir(parents=True, exist_ok=True)
    results_dir = REPO / "perf" / "soak" / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    lines = []

    def log(msg):
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        lines.append(line)

    stack = Stack(args, workdir)
    result = {"started_utc": stamp, "args": vars(args), "logs": str(workdir), "violations": []}
    violations = result["violations"]
    try:
        result["gateway_cmd"] = stack.start_gateway()
        stack.start_sim()
        if not await wait_until(lambda: stack.worker_status() == "ready", 60):
            raise SystemExit(f"the worker did not become ready; see {workdir}")
        log(f"gateway pid {stack.gateway.pid} on :{stack.port} (metrics :{stack.metrics_port}), logs in {workdir}")

        saturation, steps = await ramp(stack, args, log)
        rate = max(1.0, saturation * args.load)
        result["ramp"] = {"steps": steps, "saturation_completed_per_s": round(saturation, 1),
                          "soak_rate_per_s": round(rate, 1), "load_fraction": args.load}
        log(f"saturation {saturation:.1f} completions/s; soak rate {rate:.1f} requests/s")
        await asyncio.sleep(2)
        quiet_before = await asyncio.to_thread(stack.proc_sample)
        result["before"] = quiet_before

        stats, samples, cycles, cycle_s, hung = await soak(stack, args, rate, log)
        result["soak"] = stats.as_dict()
        result["soak"]["cycle_seconds"] = cycle_s
        result["cycles"] = cycles
        result["samples"] = samples

        # Accounting: every request sent is answered, one way or the other.
        accounted = stats.completed + stats.errors + stats.client_aborted
        if stats.violations:
            violations.append(f"{len(stats.violations)} requests hung, were cut off or malformed "
                              f"(first: {stats.violations[0]['what']})")
        if accounted + len(stats.violations) != stats.sent:
            violations.append(f"accounting: sent {stats.sent} != completed {stats.completed} + errors "
                              f"{stats.errors} + client_aborted {stats.client_aborted} + violations "
                              f"{len(stats.violations)}")
        for c in cycles:
            if c.get("ready_after_restart_s") is None:
                violations.append(f"cycle {c['cycle']} ({c['fault']}): worker not ready after the restart")
            if c.get("loss_noticed_after_kill_s") is None:
                violations.append(f"cycle {c['cycle']}: the gateway did not notice the killed engine within 15 s")

        # In flight back to 0, once the faulted engine is gone (before the clean restart).
        zero = await wait_until(lambda: stack.in_flight()[0] == 0 and stack.metrics_active() == 0.0, 30)
        inflight, ranks = await asyncio.to_thread(stack.in_flight)
        active = await asyncio.to_thread(stack.metrics_active)
        result["after_drain"] = {"in_flight": inflight, "rank_in_flight": ranks, "smg_worker_requests_active": active}
        if not zero:
            violations.append(f"in-flight not back to 0: /workers {inflight} (ranks {ranks}), "
                              f"smg_worker_requests_active {active}")
        if ranks and any(r not in (0, None) for r in ranks):
            violations.append(f"rank in-flight counts not 0: {ranks}")

        result["recovery"] = await recovery(stack, log)
        if not result["recovery"]["ready"] or result["recovery"]["completed"] < 20:
            violations.append(f"no full recovery after the last fault: {result['recovery']}")
        await wait_until(lambda: stack.in_flight()[0] == 0, 10)
        await asyncio.sleep(2)
        quiet_after = await asyncio.to_thread(stack.proc_sample)
        inflight, ranks = await asyncio.to_thread(stack.in_flight)
        result["end"] = {**(quiet_after or {}), "in_flight": inflight, "rank_in_flight": ranks,
                         "smg_worker_requests_active": await asyncio.to_thread(stack.metrics_active)}
        if inflight != 0:
            violations.append(f"in-flight {inflight} after the recovery requests")

        warmup_s = args.warmup_seconds if args.warmup_seconds is not None else max(60.0, args.minutes * 60 / 6)
        result["rss"] = rss_verdict(samples, warmup_s, args.rss_tolerance)
        if result["rss"]["ok"] is False:
            violations.append(f"RSS grew {result['rss']['growth']:.1%} after warm-up "
                              f"({result['rss']['baseline_kb']} -> {result['rss']['final_kb']} kB)")
        if quiet_before and quiet_after:
            grew = quiet_after["fds"] - quiet_before["fds"]
            result["fds"] = {"before": quiet_before["fds"], "after": quiet_after["fds"], "growth": grew,
                             "peak": max((s.get("fds") or 0) for s in samples) if samples else None}
            if grew > args.fd_slack:
                violations.append(f"file descriptors grew from {quiet_before['fds']} to {quiet_after['fds']}")

        # SIGTERM: the shutdown path (no requests in flight: it should exit promptly).
        t0 = time.monotonic()
        stack.gateway.send_signal(signal.SIGTERM)
        try:
            rc = stack.gateway.wait(timeout=40)
        except subprocess.TimeoutExpired:
            rc = None
        result["sigterm"] = {"exit_code": rc, "seconds": round(time.monotonic() - t0, 2)}
        if rc != 0:
            violations.append(f"gateway did not exit cleanly on SIGTERM (exit code {rc})")
        panics = [ln for ln in (workdir / "gateway.log").read_text(errors="replace").splitlines() if "panicked" in ln]
        if panics:
            violations.append(f"gateway panicked: {panics[0][:200]}")
    finally:
        stack.stop()

    result["ok"] = not violations
    out = results_dir / f"{stamp}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    s = result.get("soak", {})
    print("\n== soak summary")
    print(f"duration {args.minutes} min at {result.get('ramp', {}).get('soak_rate_per_s')} req/s "
          f"(saturation {result.get('ramp', {}).get('saturation_completed_per_s')}/s x {args.load}), "
          f"cycles {len(result.get('cycles', []))} ({', '.join(c['fault'] for c in result.get('cycles', []))})")
    print(f"requests: sent {s.get('sent')} = completed {s.get('completed')} + errors {s.get('errors')} "
          f"+ client-aborted {s.get('client_aborted')} + violations {s.get('violations')} "
          f"(shed, not sent: {s.get('shed_not_sent')})")
    if "rss" in result:
        r = result["rss"]
        print(f"RSS: {r.get('baseline_kb')} -> {r.get('final_kb')} kB (peak {r.get('peak_kb')}, growth "
              f"{r.get('growth')}, tolerance {r.get('tolerance')})")
    if "fds" in result:
        print(f"fds: {result['fds']['before']} -> {result['fds']['after']} (peak {result['fds']['peak']})")
    if "after_drain" in result:
        print(f"in flight after drain: {result['after_drain']}; at end: {result.get('end', {}).get('in_flight')}")
    if "sigterm" in result:
        print(f"SIGTERM: exit {result['sigterm']['exit_code']} in {result['sigterm']['seconds']}s")
    print(f"result: {out}")
    if violations:
        print("VIOLATIONS:")
        for v in violations:
            print(f"  - {v}")
        return 1
    print("== soak passed")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="soak duration (default 30)")
    p.add_argument("--load", type=float, default=0.8, help="fraction of the measured saturation (default 0.8)")
    p.add_argument("--cycle-seconds", type=float, default=None,
                   help="seconds between simulator restarts (default: duration/5, within 30..180)")
    p.add_argument("--faults", type=lambda v: v.split(","), default=FAULTS,
                   help="the rotation (default: die,die-silent,stall,deaf,garbage)")
    p.add_argument("--first-fault", type=int, default=0, help="index into the rotation to start at")
    p.add_argument("--ready-timeout", type=float, default=30.0,
                   help="seconds a restarted simulator's worker has to become ready (default 30)")
    p.add_argument("--outage-seconds", type=float, default=10.0,
                   help="how long a fired fault lasts before the simulator is restarted (default 10)")
    p.add_argument("--ramp-concurrency", type=lambda s: [int(x) for x in s.split(",")],
                   default=[4, 8, 16, 32, 64, 128, 256], help="closed-loop steps of the saturation ramp")
    p.add_argument("--ramp-step-seconds", type=float, default=5.0)
    p.add_argument("--max-outstanding", type=int, default=2000,
                   help="open-loop cap on unanswered requests (beyond it arrivals are shed, not sent)")
    p.add_argument("--warmup-seconds", type=float, default=None,
                   help="RSS is judged after this (default: max(60, duration/6))")
    p.add_argument("--rss-tolerance", type=float, default=0.10)
    p.add_argument("--fd-slack", type=int, default=4, help="file descriptors the gateway may gain")
    p.add_argument("--bin-dir", default=str(Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release"))
    p.add_argument("--model-dir", default=None, help="default: `shardgate demo --prepare`")
    p.add_argument("--shards", type=int, default=None)
    p.add_argument("--gateway-arg", action="append", default=[],
                   help="extra gateway flag (repeatable), e.g. --gateway-arg=--max-concurrent-requests=256")
    p.add_argument("--gateway-log-level", default="warn")
    p.add_argument("--sim-itl-ms", type=int, default=10)
    p.add_argument("--sim-ttft-ms", type=int, default=20)
    p.add_argument("--sim-output-len", type=int, default=32)
    p.add_argument("--sim-max-num-seqs", type=int, default=256)
    args = p.parse_args()
    if args.model_dir is None:
        args.model_dir = subprocess.run([str(Path(args.bin_dir) / "shardgate"), "demo", "--prepare"], check=True,
                                        capture_output=True, text=True).stdout.strip()
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
