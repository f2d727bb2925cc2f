"""JVM artifacts: resolve the broker and Spark-connector classpaths from jvm/*.pom.

Resolution happens once (`onceflow setup`), into <state>/jars/{kafka,spark};
jobs then run offline. The two classpaths stay apart: the broker's kafka-clients
and Spark connector's kafka-clients are different versions on purpose.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

from onceflow.errors import SetupError
from onceflow.paths import jars_dir, project_root

CLASSPATHS = ("kafka", "spark", "s3proxy", "registry")
# a classpath whose artifact is an application archive (the registry's Quarkus app) is unpacked into
# <jars>/<name>/app: its launcher finds its own jars there
APPS = ("registry",)
_VERSIONED_JAR = re.compile(r"^(?P<name>.+?)-(?P<version>\d[\w.\-]*)\.jar$")


def classpath_dir(name: str) -> Path:
    return jars_dir() / name


def classpath_jars(name: str) -> list[Path]:
    """The jars of one classpath (an app's: its launcher); fails with the fix if setup has not run."""
    folder = classpath_dir(name)
    pattern = "app/*-run.jar" if name in APPS else "*.jar"
    jars = sorted(folder.glob(pattern)) if folder.is_dir() else []
    if not jars:
        raise SetupError(
            f"no {name} jars in {folder}. Fix: run `onceflow setup` (or `make setup`) "
            "once with access to Maven Central; jobs run offline afterwards."
        )
    return jars


def _maven_repo_url() -> str:
    """The repository Maven resolves from: $ONCEFLOW_MAVEN_REPO, else the central
    URL of the installed Maven's own super POM (so a corporate mirror is one
    variable away and no address is written into this project)."""
    env = os.environ.get("ONCEFLOW_MAVEN_REPO")
    if env:
        return env
    mvn = shutil.which("mvn")
    if not mvn:
        raise SetupError("`mvn` is not on PATH. Fix: install Maven (apt-get install maven).")
    lib = Path(os.path.realpath(mvn)).parent.parent / "lib"
    for jar in sorted(lib.glob("maven-model-builder*.jar")):
        with zipfile.ZipFile(jar) as zf:
            pom = zf.read("org/apache/maven/model/pom-4.0.0.xml").decode()
        match = re.search(r"<url>([^<]+)</url>", pom)
        if match:
            return match.group(1)
    raise SetupError(
        f"could not read Maven's default repository from {lib}. "
        "Fix: set ONCEFLOW_MAVEN_REPO to your Maven repository URL."
    )


def _pyspark_jar_names() -> set[str]:
    import pyspark

    folder = Path(pyspark.__file__).parent / "jars"
    return {_artifact(p.name) for p in folder.glob("*.jar")}


def _artifact(filename: str) -> str:
    match = _VERSIONED_JAR.match(filename)
    return match.group("name") if match else filename


def _pom_property(pom: Path, prop: str) -> str:
    match = re.search(rf"<{re.escape(prop)}>([^<]+)</{re.escape(prop)}>", pom.read_text())
    if not match:
        raise SetupError(f"{pom} has no <{prop}> property")
    return match.group(1)


def extract(archive: Path, dest: Path) -> None:
    """Unpack a tar archive into `dest`, refusing members that would land outside it.

    Python's own safe filter (`filter="data"`) came in 3.11.4; Debian 12's Python is 3.11.2
    (the docker stack's base), so there the same rule is checked here before extracting."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
            return
        root = dest.resolve()
        for member in tar.getmembers():
            target = (dest / member.name).resolve()
            linked = (target.parent / member.linkname).resolve() if member.issym() or member.islnk() else target
            if member.isdev() or not target.is_relative_to(root) or not linked.is_relative_to(root):
                raise SetupError(
                    f"{archive}: member {member.name!r} would be written outside {dest} (or is a device); "
                    "refused. Fix: check the artifact's source (ONCEFLOW_MAVEN_REPO) and resolve again."
                )
        tar.extractall(dest)


def check_versions() -> None:
    """Fail early when the pinned Python packages and jvm/spark/pom.xml disagree."""
    from importlib.metadata import version

    pom = project_root() / "jvm" / "spark" / "pom.xml"
    wanted = {
        "pyspark": _pom_property(pom, "spark.version"),
        "delta-spark": _pom_property(pom, "delta.version"),
    }
    for package, jar_version in wanted.items():
        installed = version(package)
        if installed != jar_version:
            raise SetupError(
                f"{package} {installed} is installed but {pom} pins the jars at {jar_version}. "
                f"Fix: pip install -r requirements.txt, or change the pom and requirements together."
            )


def resolve(names: tuple[str, ...] = CLASSPATHS, force: bool = False, log=print) -> dict[str, list[Path]]:
    """Resolve each classpath with Maven into <jars>/<name>; skip those already there."""
    mvn = shutil.which("mvn")
    if not mvn:
        raise SetupError("`mvn` is not on PATH. Fix: install Maven (apt-get install maven).")
    root = project_root()
    env = dict(os.environ, ONCEFLOW_MAVEN_REPO=_maven_repo_url())
    result: dict[str, list[Path]] = {}
    for name in names:
        target = classpath_dir(name)
        marker = target / ".resolved"
        pom = root / "jvm" / name / "pom.xml"
        if marker.exists() and not force and marker.read_text() == pom.read_text():
            result[name] = classpath_jars(name)
            log(f"{name} jars: up to date in {target}")
            continue
        log(f"{name} jars: resolving {pom.relative_to(root)} with Maven …")
        staging = target.with_name(target.name + ".staging")
        shutil.rmtree(staging, ignore_errors=True)
        cmd = [
            mvn,
            "-B",
            "-q",
            "-s",
            str(root / "jvm" / "settings.xml"),
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            errors = [line for line in proc.stdout.splitlines() + proc.stderr.splitlines() if "ERROR" in line]
            raise SetupError(
                f"Maven could not resolve {pom}:\n"
                + "\n".join(errors[:5])
                + "\nFix: check network access to the Maven repository (ONCEFLOW_MAVEN_REPO)."
            )
        if name == "spark":
            # pyspark ships Spark's own jars; adding a second copy of, say,
            # hadoop-client-runtime would put two versions on one classpath.
            shipped = _pyspark_jar_names()
            for jar in staging.glob("*.jar"):
                if _artifact(jar.name) in shipped:
                    jar.unlink()
        for archive in staging.glob("*.tar.gz") if name in APPS else ():
            extract(archive, staging / "app")
            archive.unlink()
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        marker.write_text(pom.read_text())
        result[name] = classpath_jars(name)
        log(f"{name} jars: {len(result[name])} jars in {target}")
    return result
