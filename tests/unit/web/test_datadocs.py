"""Data Docs with no network: every address GX's templates load has a bundled file, and a
built page is rewritten to relative paths that resolve inside the site."""

from __future__ import annotations

import re
from pathlib import Path

import great_expectations

from onceflow.web import STATIC
from onceflow.web.datadocs import CDN, VENDOR, make_offline, remote_addresses, rewrite

TEMPLATES = Path(great_expectations.__file__).parent / "render" / "view" / "templates"


def test_every_cdn_address_in_the_installed_gx_templates_has_a_bundled_file():
    loaded = set()
    for template in TEMPLATES.glob("*.j2"):
        loaded |= set(remote_addresses(template.read_text()))
    loaded = {a for a in loaded if "great-expectations-web-assets" not in a}  # S3 images: the site's own copies
    assert loaded, "no CDN address found: did GX change its templates?"
    missing = loaded - set(CDN)
    assert not missing, f"GX loads {sorted(missing)}: bundle them (npm pack) and add them to CDN"
    for rel in CDN.values():
        assert (STATIC / "datadocs" / rel).stat().st_size > 100, rel


PAGE = """<html><head>
<link rel="stylesheet" href="https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css"/>
<style>.navbar-brand a { background: url('https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/full_logo_dark.png') }</style>
<script src="https://cdn.jsdelivr.net/npm/vega@5"></script>
<script src="https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js" integrity="sha384-x" crossorigin="anonymous"></script>
</head><body><a href="https://greatexpectations.io">Great Expectations</a>
<img src="https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/logo-long.png?d=20261124T033742.1Z"/>
</body></html>"""  # noqa: E501 -- a page as GX writes it, its long lines whole


def test_a_page_deep_in_the_site_points_at_the_bundled_files(tmp_path):
    site = tmp_path / "data_docs"
    page = site / "validations" / "bronze" / "run" / "time" / "bronze.html"
    page.parent.mkdir(parents=True)
    page.write_text(PAGE)
    (site / "static" / "images").mkdir(parents=True)
    (site / "static" / "images" / "logo-long.png").write_bytes(b"png")
    assert make_offline(site) == [page]
    text = page.read_text()
    assert remote_addresses(text) == [] and "integrity" not in text and "crossorigin" not in text
    assert 'href="https://greatexpectations.io"' in text  # a link to follow, not something loaded
    for ref in re.findall(r'(?:src|href)="([^"]+)"', text) + re.findall(r"url\('([^']+)'\)", text):
        if not ref.startswith("https://"):
            assert (page.parent / ref).resolve().is_file(), ref
    assert '"../../../../static/vendor/vega/vega.min.js"' in text
    assert (site / VENDOR / "fontawesome" / "webfonts" / "fa-solid-900.woff2").is_file()  # what all.min.css loads


def test_rewrite_is_relative_to_the_page():
    site = Path("/s")
    assert (
        rewrite('<script src="https://code.jquery.com/jquery-3.7.1.min.js">', site / "index.html", site)
        == '<script src="static/vendor/jquery/jquery.min.js">'
    )


def test_the_assets_copy_when_the_package_is_imported_from_the_py_files_zip(tmp_path):
    """spark-submit ships onceflow as a zip (--py-files) and the driver imports it from there: the
    docker stack's audit failed writing its report (`Not a directory: …/onceflow-0.1.0.zip/onceflow/
    web/static/datadocs`). The bundled files are read as package resources, not as paths."""
    import subprocess
    import sys
    import zipfile

    import onceflow

    src = Path(onceflow.__file__).parent
    shipped = tmp_path / "onceflow.zip"
    with zipfile.ZipFile(shipped, "w") as zf:
        for path in src.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, Path("onceflow") / path.relative_to(src))
    site = tmp_path / "site"
    (site / "static" / "styles").mkdir(parents=True)
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; import onceflow.web as w; "
        "assert '.zip' in w.__file__, w.__file__; from onceflow.web.datadocs import make_offline; "
        "w.copy_chart_assets(Path(sys.argv[2]) / 'charts'); make_offline(Path(sys.argv[2]))"
    )
    done = subprocess.run([sys.executable, "-c", script, str(shipped), str(site)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (site / "charts" / "chart.umd.min.js").read_bytes() == (STATIC / "chartjs" / "chart.umd.min.js").read_bytes()
    bundled = sorted(p.relative_to(STATIC / "datadocs") for p in (STATIC / "datadocs").rglob("*") if p.is_file())
    assert (
        bundled and sorted(p.relative_to(site / VENDOR) for p in (site / VENDOR).rglob("*") if p.is_file()) == bundled
    )
