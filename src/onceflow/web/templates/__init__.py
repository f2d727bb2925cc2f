"""The Jinja2 templates of the pages onceflow renders (onceflow.web.render_page), shipped with the package."""
