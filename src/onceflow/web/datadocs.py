"""Great Expectations Data Docs that work with no network.

GX 1.x pages load jQuery, Bootstrap, bootstrap-table, Vega and Font Awesome from CDNs and
the logo from S3: offline they are unstyled, their tables stay empty and the console says
`ReferenceError: $ is not defined`. After GX builds a site, `make_offline` copies the same
versions, bundled in static/datadocs/ (static/README.md), into the site's
`static/vendor/` and points every page at them by relative path, so the site also works
copied elsewhere or served by the onceflow page in Airflow.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from onceflow.web import copy_static

VENDOR = "static/vendor"  # inside the Data Docs site
S3 = "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/"
# every address GX 1.24's templates load (render/view/templates/*.j2) → its file in static/datadocs/
CDN = {
    "https://cdn.jsdelivr.net/npm/vega@5": "vega/vega.min.js",
    "https://cdn.jsdelivr.net/npm/vega-lite@5": "vega/vega-lite.min.js",
    "https://cdn.jsdelivr.net/npm/vega-embed@6": "vega/vega-embed.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": "fontawesome/css/all.min.css",
    "https://code.jquery.com/jquery-3.7.1.min.js": "jquery/jquery.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": "popper/popper.min.js",
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": "bootstrap/bootstrap.min.js",
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": "bootstrap/bootstrap.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": "bootstrap-table/bootstrap-table.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": "bootstrap-table/bootstrap-table.min.js",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js": "bootstrap-table/bootstrap-table-filter-control.min.js",  # noqa: E501 -- the URL exactly as GX pages name it
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.css": "bootstrap-table/bootstrap-table-filter-control-1.19.0.css",  # noqa: E501 -- the URL exactly as GX pages name it
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.min.css": "bootstrap-table/bootstrap-table-filter-control-1.19.0.min.css",  # noqa: E501 -- the URL exactly as GX pages name it
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css": "bootstrap-datepicker/bootstrap-datepicker.min.css",  # noqa: E501 -- the URL exactly as GX pages name it
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js": "bootstrap-datepicker/bootstrap-datepicker.min.js",  # noqa: E501 -- the URL exactly as GX pages name it
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css": "bootstrap-dark/bootstrap-prefers-dark.css",  # noqa: E501 -- the URL exactly as GX pages name it
}
# GX's logos on S3 → the copies GX itself writes into the site's static/images/
S3_IMAGES = {"logo-long.png": "logo-long.png", "full_logo_dark.png": "logo-long.png"}
# Subresource integrity and CORS mode mean nothing for a local file, and `crossorigin`
# makes Chromium refuse a script loaded from file:// (an opaque origin)
_SRI = re.compile(r"""\s+(integrity|crossorigin)=("[^"]*"|'[^']*')""")
_S3 = re.compile(re.escape(S3) + r"([A-Za-z0-9_.-]+)(\?[^\"')\s]*)?")
_LOCAL_IMAGE = re.compile(r"""(["'])(?:\.\./)*static/images/([A-Za-z0-9_.-]+)""")
_REMOTE = re.compile(
    r"""<(?:script|img|link)\b[^>]*?\b(?:src|href)\s*=\s*["'](https?://[^"']+)["']"""
    r"""|url\(\s*['"]?(https?://[^'")]+)"""
)


def _rel(target: Path, page: Path) -> str:
    return Path(os.path.relpath(target, page.parent)).as_posix()


def rewrite(text: str, page: Path, site: Path) -> str:
    """One page's (or stylesheet's) CDN and S3 addresses → relative paths inside `site`."""
    for url, rel in CDN.items():
        local = _rel(site / VENDOR / rel, page)
        text = text.replace(f'"{url}"', f'"{local}"').replace(f"'{url}'", f"'{local}'")

    def image(match: re.Match) -> str:
        name = S3_IMAGES.get(match.group(1), match.group(1))
        return _rel(site / "static" / "images" / name, page)

    def local_image(match: re.Match) -> str:  # GX's favicon link on validation pages is one "../" short
        return match.group(1) + _rel(site / "static" / "images" / match.group(2), page)

    text = _LOCAL_IMAGE.sub(local_image, text)
    return _SRI.sub("", _S3.sub(image, text))


def remote_addresses(text: str) -> list[str]:
    """Addresses a page would still load from the network (script, link, img, CSS url())."""
    return [a or b for a, b in _REMOTE.findall(text)]


def make_offline(site: Path) -> list[Path]:
    """Bundle the assets into `site` and rewrite every page and stylesheet; returns the files changed."""
    vendor = site / VENDOR
    if vendor.exists():
        shutil.rmtree(vendor)
    copy_static("datadocs", vendor)
    changed = []
    for path in [*site.rglob("*.html"), *(site / "static" / "styles").glob("*.css")]:
        text = path.read_text(encoding="utf-8")
        new = rewrite(text, path, site)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed
