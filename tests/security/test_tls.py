"""TLS end to end: a CA and a server certificate made with openssl, ``redis-server --tls-port``, and
``rediss://127.0.0.1:P/0?ssl_ca_certs=<ca.pem>``.

redis-py reads every ``ssl_*`` option from the URL's query string (``ssl_ca_certs``,
``ssl_cert_reqs``, ``ssl_certfile``, ``ssl_keyfile``, ``ssl_check_hostname``...),
so taskforge needs no TLS option of its own. Verification is on by default:
without the CA the connection is refused with a clear error.

A redis-server built without TLS skips these tests locally; under CI they fail,
since CI installs a TLS-capable Redis for them (see the module's check).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import redis

from taskforge import BrokerUnavailable, TaskForge

from .procs import WORKER, PrivateRedis, Processes, skip_or_fail

pytestmark = pytest.mark.redis


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def make_certificates(where: Path) -> Path:
    """A throw-away CA, and a server certificate it signed for 127.0.0.1 and localhost."""
    if shutil.which("openssl") is None:
        skip_or_fail("the TLS test needs the openssl command to make its certificates")
    where.mkdir()
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl(
        "req",
        "-x509",
        *key,
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=taskforge test CA",
        cwd=where,
    )
    openssl("req", *key, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=where)
    (where / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        cwd=where,
    )
    return where


@pytest.fixture
def tls_server(processes: Processes, tmp_path: Path) -> tuple[PrivateRedis, Path]:
    certs = make_certificates(tmp_path / "certs")
    server = PrivateRedis(processes, tls=certs)

    def ready() -> bool:
        return bool(redis.Redis(port=server.port, ssl=True, ssl_ca_certs=str(certs / "ca.pem")).ping())

    try:
        server.start(ready, timeout=15)
    except AssertionError as exc:
        if "tls" in str(exc).lower() and ("bad directive" in str(exc).lower() or "not" in str(exc).lower()):
            skip_or_fail(f"this redis-server has no TLS support: {exc}")
        raise
    return server, certs


def test_redis_py_takes_the_ca_and_verification_from_the_url(tmp_path: Path) -> None:
    url = f"rediss://127.0.0.1:6390/0?ssl_ca_certs={tmp_path}/ca.pem&ssl_cert_reqs=required"
    kwargs = redis.Redis.from_url(url).connection_pool.connection_kwargs
    assert kwargs["ssl_ca_certs"] == f"{tmp_path}/ca.pem" and kwargs["ssl_cert_reqs"] == "required"
    assert redis.Redis.from_url(url).connection_pool.connection_class is redis.SSLConnection


@pytest.mark.slow
def test_a_worker_runs_a_job_over_tls(processes: Processes, app_dir: Path, tls_server) -> None:
    server, certs = tls_server
    broker = f"rediss://127.0.0.1:{server.port}/0?ssl_ca_certs={certs / 'ca.pem'}"
    producer = TaskForge("producer", broker=broker)
    handle = producer.send("echo", "over tls")
    worker = processes.start_taskforge(*WORKER, "--no-periodic", url=broker, cwd=app_dir)
    assert handle.result(timeout=60) == "over tls"
    status = processes.taskforge("status", "secapp:app", "--json", url=broker, cwd=app_dir)
    assert status.code == 0 and '"rediss://127.0.0.1' in status.output, status.output[-500:]
    assert worker.stop() == 0, worker.output()[-2000:]
    assert "Traceback" not in worker.output()


def test_without_the_ca_the_certificate_is_refused_clearly(tls_server, processes: Processes, app_dir: Path) -> None:
    server, _ = tls_server
    with pytest.raises(BrokerUnavailable, match=r"rediss://127\.0\.0\.1:\d+/0"):
        TaskForge("x", broker=f"rediss://127.0.0.1:{server.port}/0").broker.ping()
    done = processes.taskforge("status", "secapp:app", url=f"rediss://127.0.0.1:{server.port}/0", cwd=app_dir)
    assert done.code == 1 and "certificate" in done.output.lower() and "Traceback" not in done.output, done.output


def test_plain_redis_to_a_tls_port_fails_clearly(tls_server) -> None:
    server, _ = tls_server
    with pytest.raises(BrokerUnavailable):
        TaskForge("x", broker=f"redis://127.0.0.1:{server.port}/0").broker.ping()
