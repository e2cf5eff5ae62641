"""A real exchange for the tests: ``pmx dev`` started on a free loopback port, with its own
private Postgres in a temporary folder, and stopped (SIGINT, then SIGKILL) when done."""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Optional, Sequence

import httpx

REPO = Path(__file__).resolve().parents[3]


def pmx_binary() -> Path:
    """bin/pmx of this repository ($PMX_BIN overrides it), built with `go build` when missing."""
    env = os.environ.get("PMX_BIN")
    if env:
        path = Path(env)
        if not os.access(path, os.X_OK):
            raise RuntimeError(f"$PMX_BIN is {env}, which is not an executable file")
        return path
    path = REPO / "bin" / "pmx"
    if not path.exists():
        if shutil.which("go") is None:
            raise RuntimeError(f"{path} is missing and `go` is not on PATH to build it: run `make build` first")
        subprocess.run(["go", "build", "-o", str(path), "./cmd/pmx"], cwd=REPO, check=True, timeout=600)
    return path


def _stop_with_parent() -> None:
    """In the child, before pmx starts: SIGINT it if the test process dies without stopping it
    (killed by a timeout, say), so that no pmx dev or Postgres outlives the tests. Linux only."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGINT)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class PmxDev:
    """One `pmx dev` process and an admin client for it."""

    def __init__(self, args: Sequence[str] = (), start_timeout: float = 120.0) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="pmx-pytest-"))
        # pmx dev runs Postgres as an unprivileged user when started as root: it must reach the
        # data dir, so its parent may not be mkdtemp's 0700.
        os.chmod(self.tmp, 0o755)
        self.admin_token = secrets.token_hex(24)
        self.log_path = self.tmp / "pmx.log"
        self._log = open(self.log_path, "wb")
        cmd = [str(pmx_binary()), "dev", "--addr", "127.0.0.1:0", "--metrics-addr", "0",
               "--data-dir", str(self.tmp / "data"), "--admin-token", self.admin_token,
               "--markets", "", "--log-level", "warn", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL,
                                     preexec_fn=_stop_with_parent)
        self._stdout: list[str] = []
        self._found = threading.Event()
        self.url = ""
        threading.Thread(target=self._read_stdout, daemon=True).start()
        try:
            self._wait_ready(start_timeout)
        except BaseException:
            self.stop()
            raise
        self.admin = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.admin_token}"},
                                  timeout=30)

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            self._stdout.append(line)
            # "  API:       http://127.0.0.1:PORT/api/v1"
            if line.strip().startswith("API:") and not self.url:
                self.url = line.split("API:", 1)[1].strip().removesuffix("/api/v1")
                self._found.set()

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._found.wait(0.1):
            if self.proc.poll() is not None:
                raise RuntimeError(f"pmx dev exited with {self.proc.returncode} before serving:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"pmx dev did not say where it serves within {timeout} s:\n{self.log_tail()}")
        with httpx.Client(timeout=5) as http:
            while True:
                try:
                    if http.get(self.url + "/readyz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if self.proc.poll() is not None:
                    raise RuntimeError(f"pmx dev exited with {self.proc.returncode}:\n{self.log_tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"pmx dev at {self.url} was not ready within {timeout} s:\n{self.log_tail()}")
                time.sleep(0.05)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text("utf-8", "replace")
        except OSError:
            text = ""
        return "\n".join(["stdout:", *self._stdout[-10:], "stderr:", *text.splitlines()[-lines:]])

    def stop(self) -> None:
        """Stops pmx dev (and with it its Postgres): SIGINT, then SIGKILL after 30 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        if getattr(self, "admin", None) is not None:
            self.admin.close()
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- the admin API ----------------------------------------------------------------------

    def _admin(self, path: str, body: Optional[dict[str, Any]] = None) -> Any:
        resp = self.admin.post("/admin/v1" + path, json=body or {})
        if resp.status_code not in (200, 201):
            raise RuntimeError(f"POST /admin/v1{path}: {resp.status_code} {resp.text}")
        return resp.json()

    def new_account(self, name: Optional[str] = None, **key: Any) -> tuple[str, str]:
        """A new account with the play-money grant: (API key, account id). ``key`` chooses what
        the key may do, as the admin API takes it (``scope``, ``expiresAt``, ``ipAllowlist``)."""
        out = self._admin("/accounts", {"name": name or f"py-{uuid.uuid4().hex[:12]}", **key})
        return out["apiKey"], out["account"]["id"]

    def new_key(self, account_id: str, **key: Any) -> str:
        """Another API key of an account, made by the admin API as ``key`` says (``scope``,
        ``label``, ``expiresAt``, ``ipAllowlist``, ``publicKey``)."""
        return str(self._admin(f"/accounts/{account_id}/keys", key)["apiKey"])

    def new_market(self, question: str = "Will the Python SDK pass?") -> str:
        return str(self._admin("/markets", {"question": question, "category": "testing"})["id"])

    def new_event(self, keys: Sequence[str], question: str = "Which one wins?") -> dict[str, Any]:
        """An OPEN event of the given outcome keys, as the admin API answers it (``id``, and
        ``outcomes`` each with its ``key`` and ``marketId``)."""
        return dict(self._admin("/events", {"question": question, "category": "testing",
                                            "outcomes": [{"key": k, "label": k.upper()} for k in keys]}))

    def close_market(self, market_id: str) -> None:
        self._admin(f"/markets/{market_id}/close")

    def pause_market(self, market_id: str, paused: bool = True) -> None:
        """Halts (or resumes) trading in a market without closing it."""
        self._admin(f"/markets/{market_id}/{'pause' if paused else 'resume'}")

    def resolve(self, market_id: str, outcome: str) -> None:
        self._admin(f"/markets/{market_id}/resolve", {"outcome": outcome})
