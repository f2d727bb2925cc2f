"""The onceflow page behind Airflow's authentication, inside the real Airflow API server app.

The FastAPI app is mounted by the plugin (plugins/onceflow_plugin.py) into Airflow's
own app, so these requests go through Airflow's auth manager: anonymous and forged
tokens are refused, a logged-in user (JWT from POST /auth/token, as header or as the
browser's `_token` cookie) sees every pipeline and its audit report.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.airflow_helpers import AIRFLOW_HOME, ROOT, migrate_db

os.environ.setdefault("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "admin:admin")
os.environ.setdefault("AIRFLOW__API_AUTH__JWT_SECRET", "onceflow-test-" + "x" * 64)

PIPELINE = """name: {name}
source: {{bootstrap_servers: "127.0.0.1:1", topic: {name}}}
schema: {{event_time: ts, fields: [{{name: ts, type: timestamp}}]}}
sinks: {{bronze: {{path: tables/{name}/bronze}}, quarantine: {{path: tables/{name}/quarantine}}}}
checkpoint: checkpoints/{name}
"""


@pytest.fixture(scope="module")
def client():
    migrate_db()
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    with TestClient(create_app()) as c:
        yield c


@pytest.fixture(scope="module")
def token(client) -> str:
    password = json.loads((AIRFLOW_HOME / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
    resp = client.post("/auth/token", json={"username": "admin", "password": password})
    assert resp.status_code in (200, 201), resp.text
    return resp.json()["access_token"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """Two pipelines (no broker: Kafka is unreachable on purpose) and one audit report."""
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    for name in ("alpha", "beta"):
        (pipelines / f"{name}.yaml").write_text(PIPELINE.format(name=name))
    reports = tmp_path / "reports"
    run = reports / "alpha" / "20261122T120000Z"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(
        json.dumps(
            {
                "pipeline": "alpha",
                "status": "passed",
                "exit_code": 0,
                "checks": [{"name": "no_duplicates", "status": "passed"}],
                "failed_checks": [],
                "finished_at": "2026-11-22T12:00:05Z",
            }
        )
    )
    (run / "index.html").write_text("<html><body><h1>audit of alpha</h1></body></html>")
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ONCEFLOW_PIPELINES_DIR", str(pipelines))
    monkeypatch.setenv("ONCEFLOW_REPORTS", str(reports))
    return tmp_path


@pytest.mark.parametrize(
    "path", ["/onceflow/", "/onceflow/api/pipelines", "/onceflow/reports/alpha/20261122T120000Z/index.html"]
)
def test_anonymous_requests_are_refused(client, project, path):
    resp = client.get(path)
    assert resp.status_code == 401
    assert "audit of alpha" not in resp.text and "alpha" not in resp.text


def test_a_forged_token_is_refused(client, project):
    resp = client.get("/onceflow/", headers={"Authorization": "Bearer not.a.jwt"})
    assert resp.status_code in (401, 403)
    client.cookies.set("_token", "forged")
    try:
        assert client.get("/onceflow/").status_code in (401, 403)
    finally:
        client.cookies.clear()


def test_logged_in_user_sees_every_pipeline_and_its_audit(client, token, project):
    resp = client.get("/onceflow/api/pipelines", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200
    from jsonschema import Draft202012Validator

    schema = json.loads((ROOT / "docs" / "schemas" / "onceflow-page-pipelines.schema.json").read_text())
    Draft202012Validator(schema).validate(resp.json())
    rows = {r["pipeline"]: r for r in resp.json()}
    assert set(rows) == {"alpha", "beta"}
    # nothing ever ran: no checkpoint, no status log
    assert rows["alpha"]["verdict"] == "not_started" and rows["alpha"]["last_batch"] is None
    assert rows["alpha"]["audit"]["passed"] is True
    assert rows["alpha"]["audit"]["url"] == "/onceflow/reports/alpha/20261122T120000Z/index.html"
    assert rows["beta"]["audit"] is None

    client.cookies.set("_token", token)  # how the browser sends it
    try:
        page = client.get("/onceflow/")
    finally:
        client.cookies.clear()
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "data-pipeline='alpha'" in page.text and "data-pipeline='beta'" in page.text
    assert "not_started" in page.text and "no audit yet" in page.text
    assert "href='/onceflow/reports/alpha/20261122T120000Z/index.html'" in page.text


def test_reports_are_served_and_nothing_outside_them(client, token, project):
    auth = {"Authorization": f"Bearer {token}"}
    resp = client.get("/onceflow/reports/alpha/20261122T120000Z/index.html", headers=auth)
    assert resp.status_code == 200 and "audit of alpha" in resp.text
    (project / "secret.txt").write_text("TOP-SECRET-CONTENT")
    for path in (
        "/onceflow/reports/../secret.txt",
        "/onceflow/reports/%2e%2e/secret.txt",
        "/onceflow/reports/alpha/missing.html",
    ):
        resp = client.get(path, headers=auth)
        assert resp.status_code == 404, path
        assert "TOP-SECRET-CONTENT" not in resp.text


def test_a_bad_pipeline_file_is_a_row_that_says_why(client, token, project):
    (project / "pipelines" / "gamma.yaml").write_text("name: gamma\nsource: {topic: x}\n")
    rows = {
        r["file"]: r for r in client.get("/onceflow/api/pipelines", headers={"Authorization": f"Bearer {token}"}).json()
    }
    assert rows["gamma.yaml"]["verdict"] == "error"
    assert "gamma.yaml" in rows["gamma.yaml"]["reasons"][0] and "sinks" in rows["gamma.yaml"]["reasons"][0]
    assert rows["alpha.yaml"]["verdict"] == "not_started"


def test_the_plugin_registers_the_page_the_link_and_the_app(client, token):
    resp = client.get("/api/v2/plugins", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200
    plugin = next(p for p in resp.json()["plugins"] if p["name"] == "onceflow")
    assert plugin["fastapi_apps"][0]["url_prefix"] == "/onceflow"
    view = plugin["external_views"][0]
    assert view["href"] == "/onceflow/" and view["url_route"] == "onceflow" and view["destination"] == "nav"
    assert any("AuditReportLink" in link for link in plugin["operator_extra_links"])


def test_the_page_has_charts_dag_run_links_the_report_link_and_refreshes_itself(client, token, project):
    import re
    import shutil

    status = project / "home" / "pipelines" / "alpha"
    status.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "data" / "audit-report" / "status.jsonl", status / "status.jsonl")
    client.cookies.set("_token", token)
    try:
        page = client.get("/onceflow/").text
        rows = {r["pipeline"]: r for r in client.get("/onceflow/api/pipelines").json()}
        scripts = re.findall(r'<script src="([^"]+)"', page)
        served = [client.get(f"/onceflow/{src}") for src in scripts]
    finally:
        client.cookies.clear()
    assert scripts == ["static/chartjs/chart.umd.min.js", "static/onceflow-charts.js"]  # bundled, no CDN
    assert all(r.status_code == 200 and "javascript" in r.headers["content-type"] for r in served)
    assert "https://" not in page.split("<body>")[1]
    for kind in ("durations", "rate", "lag", "partitions"):
        assert f"data-chart='{kind}' data-source='chart-alpha'" in page
    assert len(rows["alpha"]["batches"]) == 40 and rows["alpha"]["batches"][-1]["lag"] is not None
    assert rows["beta"]["batches"] == []
    for kind in ("stream", "batch", "audit", "recover", "backfill"):
        assert f"href='/dags/alpha_{kind}/runs' target='_top'" in page
    assert "href='/onceflow/reports/alpha/20261122T120000Z/index.html' target='_blank'>last audit report" in page
    assert "setInterval(refresh, 15000)" in page
    assert "lag (offsets)" in page and "lag = records" not in page and "counts\noffsets" in page


def test_static_files_are_served_and_nothing_outside_them(client, token):
    auth = {"Authorization": f"Bearer {token}"}
    assert client.get("/onceflow/static/onceflow-charts.js").status_code == 401  # behind Airflow's login too
    assert client.get("/onceflow/static/chartjs/LICENSE.md", headers=auth).status_code == 200
    for path in ("/onceflow/static/../ui.py", "/onceflow/static/%2e%2e/__init__.py", "/onceflow/static/nope.js"):
        assert client.get(path, headers=auth).status_code == 404, path
