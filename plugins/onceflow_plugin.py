"""The onceflow Airflow plugin: the onceflow page (FastAPI app + navigation entry) and the
"Audit report" extra link. The code lives in onceflow.airflow (ui.py, links.py)."""

from airflow.plugins_manager import AirflowPlugin

from onceflow.airflow.links import AuditReportLink
from onceflow.airflow.ui import PREFIX, app


class OnceflowPlugin(AirflowPlugin):
    name = "onceflow"
    fastapi_apps = [{"app": app, "url_prefix": PREFIX, "name": "onceflow"}]
    external_views = [
        {"name": "onceflow", "href": f"{PREFIX}/", "url_route": "onceflow", "destination": "nav", "category": "browse"}
    ]
    operator_extra_links = [AuditReportLink()]
