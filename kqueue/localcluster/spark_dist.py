"""A Spark "distribution" for the Spark operator's spark-submit, built from Maven Central.

The operator submits an application by running ``$SPARK_HOME/bin/spark-submit``. No Spark
release download is available where kqueue is tested, only Maven Central and the machine's JDK
(Java 17), so the distribution is assembled instead: ``mvn dependency:copy-dependencies`` of
``org.apache.spark:spark-kubernetes_2.13`` (which brings spark-core and the Kubernetes client)
into ``jars/``, and a ``bin/spark-submit`` script that runs ``org.apache.spark.deploy.SparkSubmit``
on them with the module openings Spark 4 needs on Java 17 (Spark's own launcher adds the same,
``JavaModuleOptions``). Cluster-mode submission only creates the driver's pod, ConfigMap and
Service through the API server; nothing Spark runs here beyond that.

It lands in ``$KQUEUE_CACHE_DIR/spark/spark-<version>/`` with a stamp, built once under its own
lock. Run: ``python -m kqueue.localcluster.spark_dist [--print-home]``.

The Spark operator's start (``spark-operator`` in operators.py) puts ``ensure()`` on its PATH
as SPARK_HOME and gives it ``sec1_kubeconfig(...)``: its spark-submit then creates the driver's
pod, which kqueue releases and kube-scheduler binds on a kwok node. kwok runs no container, so
no driver asks for executors: tests create them as the driver would (docs/integrations.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import yaml
from cryptography.hazmat.primitives import serialization

from kqueue.localcluster import build

SPARK_VERSION = os.environ.get("KQUEUE_SPARK_VERSION", "4.2.0")
ARTIFACT = "org.apache.spark:spark-kubernetes_2.13"
STAMP = ".kqueue-spark.json"
# Bump when the way the distribution is assembled changes, so existing caches are rebuilt.
RECIPE_REVISION = 3

# Spark's launcher (org.apache.spark.launcher.JavaModuleOptions) passes these on Java 17+.
JAVA_OPTIONS = (
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
    "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
    "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
    "-Djdk.reflect.useDirectMethodHandle=false",
    "-Dio.netty.tryReflectionSetAccessible=true",
)


class SparkDistError(build.BuildError):
    """The distribution could not be assembled; the message names the step and its output."""


def pom(version: str) -> str:
    # Spark's parent pom as a BOM: the versions Spark's own build pins (its distribution's
    # jars). Maven's nearest-wins alone mixes jackson-core 2.18 with jackson-databind 2.21, and
    # spark-submit dies in log4j's set-up (NoClassDefFoundError ...JsonSerializeAs).
    # BouncyCastle (Spark pins it for its tests only): spark-submit's Kubernetes client (fabric8)
    # reads an EC client key ("EC PRIVATE KEY", spark_client_kubeconfig) only with it.
    group, artifact = ARTIFACT.split(":")
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.kqueue.local</groupId>
  <artifactId>spark-dist</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencyManagement><dependencies>
    <dependency><groupId>{group}</groupId><artifactId>spark-parent_2.13</artifactId><version>{version}</version>
      <type>pom</type><scope>import</scope></dependency>
  </dependencies></dependencyManagement>
  <dependencies>
    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version></dependency>
    <dependency><groupId>org.bouncycastle</groupId><artifactId>bcpkix-jdk18on</artifactId><scope>runtime</scope></dependency>
    <dependency><groupId>org.bouncycastle</groupId><artifactId>bcprov-jdk18on</artifactId><scope>runtime</scope></dependency>
  </dependencies>
</project>
"""


def spark_submit_script() -> str:
    opts = " ".join(JAVA_OPTIONS)
    # SPARK_HOME is the directory above bin/ unless the caller set it (the operator does).
    return f"""#!/bin/sh
# Assembled by kqueue.localcluster.spark_dist: spark-submit without Spark's launcher.
: "${{SPARK_HOME:=$(cd "$(dirname "$0")/.." && pwd)}}"
exec "${{JAVA_HOME:+$JAVA_HOME/bin/}}java" {opts} $SPARK_SUBMIT_OPTS \\
  -cp "$SPARK_HOME/jars/*" org.apache.spark.deploy.SparkSubmit "$@"
"""


def recipe(version: str) -> dict[str, object]:
    return {"artifact": ARTIFACT, "version": version, "revision": RECIPE_REVISION}


def home(version: str = SPARK_VERSION) -> Path:
    return build.cache_dir() / "spark" / f"spark-{version}"


def stamp_ok(version: str = SPARK_VERSION) -> bool:
    stamp = home(version) / STAMP
    try:
        return bool(json.loads(stamp.read_text()).get("recipe") == recipe(version))
    except (OSError, ValueError):
        return False


def _mvn() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SparkDistError("spark-submit for the Spark operator: `mvn` (Maven) is not on PATH")
    return mvn


def ensure(version: str = SPARK_VERSION) -> Path:
    """SPARK_HOME for ``version``, assembled on first use (a few minutes, ~100 MB of jars)."""
    if stamp_ok(version):
        return home(version)
    with build.build_lock("build-spark.lock"):
        if stamp_ok(version):
            return home(version)
        return _assemble(version)


def _assemble(version: str) -> Path:
    out = home(version)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "bin").mkdir(parents=True)
    log_file = build.cache_dir() / "logs" / f"spark-{version}.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    build.log(f"spark {version}: resolving {ARTIFACT} from Maven Central (log {log_file})")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kqueue-spark-pom-") as pom_dir:
        (Path(pom_dir) / "pom.xml").write_text(pom(version))
        with log_file.open("wb") as fh:
            rc = subprocess.call(
                [_mvn(), "-B", "-q", "dependency:copy-dependencies", "-DincludeScope=runtime",
                 f"-DoutputDirectory={tmp / 'jars'}"],
                cwd=pom_dir, stdout=fh, stderr=subprocess.STDOUT,
            )  # fmt: skip
    if rc != 0:
        tail = log_file.read_text(errors="replace")[-2000:]
        raise SparkDistError(
            f"spark {version}: mvn dependency:copy-dependencies exited {rc}:\n{tail}"
        )
    script = tmp / "bin" / "spark-submit"
    script.write_text(spark_submit_script())
    script.chmod(0o755)
    jars = sorted((tmp / "jars").iterdir())
    size = sum(p.stat().st_size for p in jars)
    seconds = int(time.monotonic() - started)
    (tmp / STAMP).write_text(
        json.dumps(
            {"recipe": recipe(version), "jars": len(jars), "bytes": size, "seconds": seconds},
            indent=1,
        )
    )
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    build.log(f"spark {version}: {len(jars)} jars, {size // 2**20} MiB, in {seconds}s -> {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print-home", action="store_true", help="print SPARK_HOME")
    args = parser.parse_args(argv)
    spark_home = ensure()
    if args.print_home:
        print(spark_home)
    return 0



def sec1_kubeconfig(kubeconfig: Path, out_dir: Path) -> Path:
    """A copy of ``kubeconfig`` whose client key is in SEC1 ("EC PRIVATE KEY") form.

    The local cluster's client keys are EC in PKCS#8 ("PRIVATE KEY"); fabric8 guesses a key's
    algorithm from its PEM header, takes PKCS#8 for RSA and fails ("Invalid DER: object is not
    integer"). The Go operator reads either form.
    """
    config = yaml.safe_load(kubeconfig.read_text())
    user = config["users"][0]["user"]
    key = serialization.load_pem_private_key(Path(user["client-key"]).read_bytes(), password=None)
    key_path = out_dir / "spark-submit-client.key"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    user["client-key"] = str(key_path)
    out = out_dir / "spark-submit.kubeconfig"
    out.write_text(yaml.safe_dump(config, sort_keys=False))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
