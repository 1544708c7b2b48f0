"""Build the local control plane's binaries from their Go modules, cached by version.

No container runtime or release download is available where kqueue is tested, only the Go
module proxy, so every binary is compiled from source:

* kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from ``k8s.io/kubernetes``.
  That module points every ``k8s.io/<staging>`` dependency at ``./staging/...``, which only works
  inside the kubernetes repository, so a generated wrapper module requires it and replaces each
  staging module with its published ``v0.<minor>.<patch>``.
* etcd from ``go.etcd.io/etcd/server/v3`` (its go.mod has relative replace directives, which is
  why ``go install module@version`` refuses it; a wrapper module ignores them).
* kwok (fake nodes and pod life cycles) and helm.

The control plane (Kubernetes, etcd, kwok) is what a cluster waits for; helm is a tool (the
chart tests and a human use it), built on its own so that no cluster waits for its build.

Each component lands in ``$KQUEUE_CACHE_DIR/bin/<component>-<version>/`` (default cache dir
``~/.cache/kqueue``) with a stamp file recording the recipe, so a second run does nothing. The
generated wrapper modules live next to it under ``gomod/`` for inspection, and the full
``go build`` output under ``logs/``. A directory of symlinks to the control plane (and to the
tools already built) is what ``LocalCluster`` uses (``--print-dir`` prints it).

Run: ``python -m kqueue.localcluster.build [--print-dir] [--force] [--only NAME]``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

# v1.37.2 serves scheduling.k8s.io/v1beta1 (the PodGroup with a mutable minCount); v1.36.4 (the
# newest v1.36 patch in the checksum database: v1.36.5 answers 404) stays reachable with
# KQUEUE_KUBERNETES_VERSION=v1.36.4 (`make test-k136`). 1.37's build/dependencies.yaml pins etcd
# 3.7.0 for its own images, but the API server speaks the etcd v3 API of 3.5 and later, and
# etcd v3.6.16 has the fixes 1.37 was tested against; kwok and helm use only stable APIs.
KUBERNETES_VERSION = os.environ.get("KQUEUE_KUBERNETES_VERSION", "v1.37.2")
ETCD_VERSION = os.environ.get("KQUEUE_ETCD_VERSION", "v3.6.16")
KWOK_VERSION = os.environ.get("KQUEUE_KWOK_VERSION", "v0.8.0")
HELM_VERSION = os.environ.get("KQUEUE_HELM_VERSION", "v3.22.0")

# Bump when the way a component is built changes, so existing caches are rebuilt.
RECIPE_REVISION = 1

STAMP = ".kqueue-build.json"


class BuildError(RuntimeError):
    """A component failed to build; the message names it, its version and the Go error."""


def cache_dir() -> Path:
    return Path(os.environ.get("KQUEUE_CACHE_DIR") or Path.home() / ".cache" / "kqueue")


def log(msg: str) -> None:
    print(f"[kqueue build] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Component:
    """One Go module version and the binaries built from it."""

    name: str
    module: str
    version: str
    # (package import path, output binary name)
    binaries: tuple[tuple[str, str], ...]
    tags: tuple[str, ...] = ()
    # ldflags beyond -s -w, computed at build time (they may carry the build date)
    ldflags: Callable[[], list[str]] = field(default=lambda: [], compare=False)
    # returns extra go.mod text (replace directives) for the wrapper, given the module's go.mod
    replaces: Callable[[str], str] = field(default=lambda _gomod: "", compare=False)
    # arguments that make a binary print its version, to check the result
    version_args: dict[str, list[str]] = field(default_factory=dict, compare=False)
    # extra "module version" requirements of the wrapper: they raise the dependency versions to
    # another module's build list, so that two builds share compiled packages
    requires: tuple[str, ...] = ()
    # False for a tool no cluster needs to start (helm): ``ensure_binaries`` does not wait for it
    control_plane: bool = True

    @property
    def dir_name(self) -> str:
        return f"{self.name}-{self.version}"

    def recipe(self) -> dict[str, object]:
        """What the stamp records: a change in any of these means a rebuild."""
        flags = [re.sub(r"buildDate=\S+", "buildDate=*", f) for f in self.ldflags()]
        recipe: dict[str, object] = {
            "revision": RECIPE_REVISION,
            "module": self.module,
            "version": self.version,
            "binaries": [list(b) for b in self.binaries],
            "tags": list(self.tags),
            "ldflags": flags,
        }
        if self.requires:  # only when set, so the stamps of other components stay valid
            recipe["requires"] = list(self.requires)
        return recipe


def _minor(version: str) -> tuple[str, str]:
    m = re.match(r"v(\d+)\.(\d+)\.", version)
    if not m:
        raise BuildError(f"cannot parse version {version!r}")
    return m.group(1), m.group(2)


def _kubernetes_ldflags() -> list[str]:
    major, minor = _minor(KUBERNETES_VERSION)
    build_date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    flags: list[str] = []
    # kubectl reports its client version from component-base; client-go's copy is what
    # clients put in their user agent. Both must say the real version.
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={KUBERNETES_VERSION}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate={build_date}",
        ]
    return flags


_STAGING_RE = re.compile(r"^\s*(k8s\.io/[A-Za-z0-9._-]+)\s+=>\s+\./staging/\S+\s*$", re.M)


def _kubernetes_replaces(gomod: str) -> str:
    """Point each staging module at its published version (v1.X.Y -> v0.X.Y)."""
    staging = sorted(set(_STAGING_RE.findall(gomod)))
    if not staging:
        raise BuildError("k8s.io/kubernetes go.mod lists no ./staging replace directives")
    published = "v0" + KUBERNETES_VERSION[2:]
    lines = "\n".join(f"\t{mod} => {mod} {published}" for mod in staging)
    return f"replace (\n{lines}\n)\n"


def _helm_ldflags() -> list[str]:
    # Helm's default Capabilities.KubeVersion (used by `helm template` and lint without a
    # cluster) follows these; make it the version of the cluster we run.
    major, minor = _minor(KUBERNETES_VERSION)
    flags = [f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}"]
    flags.append("-X helm.sh/helm/v3/internal/version.gitTreeState=clean")
    for pkg in ("helm.sh/helm/v3/pkg/chartutil", "helm.sh/helm/v3/pkg/lint/rules"):
        flags += [f"-X {pkg}.k8sVersionMajor={major}", f"-X {pkg}.k8sVersionMinor={minor}"]
    return flags


def _kwok_ldflags() -> list[str]:
    return [f"-X sigs.k8s.io/kwok/pkg/consts.Version={KWOK_VERSION}"]


def components() -> list[Component]:
    return [
        Component(
            name="etcd",
            module="go.etcd.io/etcd/server/v3",
            version=ETCD_VERSION,
            binaries=(("go.etcd.io/etcd/server/v3", "etcd"),),
            version_args={"etcd": ["--version"]},
        ),
        Component(
            name="kwok",
            module="sigs.k8s.io/kwok",
            version=KWOK_VERSION,
            binaries=(("sigs.k8s.io/kwok/cmd/kwok", "kwok"),),
            ldflags=_kwok_ldflags,
            version_args={"kwok": ["--version"]},
        ),
        Component(
            name="helm",
            module="helm.sh/helm/v3",
            version=HELM_VERSION,
            binaries=(("helm.sh/helm/v3/cmd/helm", "helm"),),
            ldflags=_helm_ldflags,
            version_args={"helm": ["version", "--short"]},
            control_plane=False,
        ),
        Component(
            name="kubernetes",
            module="k8s.io/kubernetes",
            version=KUBERNETES_VERSION,
            binaries=(
                ("k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"),
                ("k8s.io/kubernetes/cmd/kube-controller-manager", "kube-controller-manager"),
                ("k8s.io/kubernetes/cmd/kube-scheduler", "kube-scheduler"),
                ("k8s.io/kubernetes/cmd/kubectl", "kubectl"),
            ),
            tags=("selinux", "notest"),
            ldflags=_kubernetes_ldflags,
            replaces=_kubernetes_replaces,
            version_args={
                "kube-apiserver": ["--version"],
                "kubectl": ["version", "--client"],
            },
        ),
    ]


def set_dir_name() -> str:
    return "set-" + "_".join(c.dir_name for c in components() if c.control_plane)


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        CGO_ENABLED="0",
        # The go directive of these modules is satisfied by the local toolchain; never let the
        # go command try to download another one.
        GOTOOLCHAIN="local",
        GO111MODULE="on",
    )
    return env


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "the Go toolchain (`go`) is not on PATH; it is needed to build the binaries"
        )
    return go


def _run_go(args: list[str], *, cwd: Path, log_file: Path, label: str, nice: int = 0) -> None:
    """Run a go command, stream its output to log_file and print a heartbeat meanwhile.

    ``nice`` > 0 runs it at that lower CPU priority (a build nothing waits for yet gives way to
    the ones something does wait for, and to running tests)."""
    with log_file.open("a") as out:
        out.write(f"$ go {' '.join(args)}\n")
        out.flush()
        proc = subprocess.Popen(
            [*(["nice", "-n", str(nice)] if nice > 0 else []), _go(), *args],
            cwd=cwd,
            env=_go_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        count = 0
        last = ""
        started = time.monotonic()
        stop = threading.Event()

        def heartbeat() -> None:
            while not stop.wait(30):
                mins, secs = divmod(int(time.monotonic() - started), 60)
                log(f"{label}: {mins}m{secs:02d}s, {count} packages compiled (last: {last})")

        beat = threading.Thread(target=heartbeat, daemon=True)
        beat.start()
        try:
            for line in proc.stdout:
                out.write(line)
                # with -v, go build prints each package it compiles, one per line
                if not line.startswith(("go: ", "#")) and " " not in line.strip():
                    count += 1
                    last = line.strip()
            rc = proc.wait()
        finally:
            stop.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if rc != 0:
        tail = "".join(log_file.read_text().splitlines(keepends=True)[-30:])
        raise BuildError(f"{label}: `go {args[0]}` failed (exit {rc}); see {log_file}:\n{tail}")


def _module_gomod(component: Component, workdir: Path, log_file: Path) -> str:
    """Download the module and return its go.mod text (from the module cache)."""
    return Path(module_info(component, workdir, log_file)["GoMod"]).read_text()


def module_info(component: Component, workdir: Path, log_file: Path) -> dict[str, str]:
    """Download the module through the module proxy; `go mod download -json` answers.

    ``Dir`` is the module's files in the module cache (operators take their CRDs from there),
    ``GoMod`` its go.mod.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(
        [_go(), "mod", "download", "-json", f"{component.module}@{component.version}"],
        cwd=workdir,
        env=_go_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    with log_file.open("a") as out:
        out.write(res.stdout + res.stderr)
    try:
        info = json.loads(res.stdout)
    except json.JSONDecodeError:
        info = {}
    if res.returncode != 0 or "GoMod" not in info or "Dir" not in info:
        err = info.get("Error") or res.stderr.strip() or res.stdout.strip()
        raise BuildError(
            f"{component.name} {component.version}: cannot download "
            f"{component.module}@{component.version}: {err}"
        )
    return {k: str(v) for k, v in info.items()}


def _write_wrapper(component: Component, gomod: str, workdir: Path) -> None:
    go_line = re.search(r"^go\s+(\S+)", gomod, re.M)
    text = (
        "// Generated by kqueue.localcluster.build: a module that only exists to build\n"
        f"// {component.module} {component.version} with published dependencies.\n"
        f"module kqueue.local/build/{component.name}\n\n"
        f"go {go_line.group(1) if go_line else '1.24'}\n\n"
        f"require {component.module} {component.version}\n\n"
        + "".join(f"require {req}\n" for req in component.requires)
        + ("\n" if component.requires else "")
        + component.replaces(gomod)
    )
    path = workdir / "go.mod"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
        # a changed go.mod invalidates the recorded sums
        (workdir / "go.sum").unlink(missing_ok=True)


def _check_version(component: Component, out_dir: Path) -> dict[str, str]:
    seen: dict[str, str] = {}
    for binary, args in component.version_args.items():
        res = subprocess.run(
            [str(out_dir / binary), *args], capture_output=True, text=True, timeout=60, check=False
        )
        text = (res.stdout + res.stderr).strip()
        want = component.version.lstrip("v")
        if res.returncode != 0 or want not in text:
            raise BuildError(
                f"{component.name} {component.version}: built {binary} does not report version "
                f"{want} (exit {res.returncode}): {text[:500]}"
            )
        seen[binary] = text.splitlines()[0]
    return seen


def stamp_ok(component: Component, out_dir: Path) -> bool:
    stamp = out_dir / STAMP
    if not stamp.is_file():
        return False
    try:
        data = json.loads(stamp.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    if data.get("recipe") != component.recipe():
        return False
    return all((out_dir / name).is_file() for _, name in component.binaries)


def build_component(component: Component, *, force: bool = False, nice: int = 0) -> Path:
    root = cache_dir()
    out_dir = root / "bin" / component.dir_name
    if not force and stamp_ok(component, out_dir):
        log(f"{component.dir_name}: cached in {out_dir}")
        return out_dir

    workdir = root / "gomod" / component.dir_name
    logs = root / "logs"
    workdir.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    log_file = logs / f"build-{component.dir_name}.log"
    log_file.write_text("")
    label = f"{component.name} {component.version}"

    started = time.monotonic()
    log(f"{label}: resolving {component.module}@{component.version}")
    gomod = _module_gomod(component, workdir, log_file)
    _write_wrapper(component, gomod, workdir)

    tmp_out = root / "bin" / f".{component.dir_name}.tmp"
    shutil.rmtree(tmp_out, ignore_errors=True)
    tmp_out.mkdir(parents=True)
    ldflags = " ".join(["-s", "-w", *component.ldflags()])
    args = ["build", "-v", "-mod=mod", "-trimpath", f"-ldflags={ldflags}"]
    if component.tags:
        args.append("-tags=" + ",".join(component.tags))
    names = [name for _, name in component.binaries]
    log(f"{label}: go build {', '.join(names)} (log: {log_file})")
    if len(component.binaries) == 1:
        pkg, name = component.binaries[0]
        _run_go(
            [*args, "-o", str(tmp_out / name), pkg],
            cwd=workdir,
            log_file=log_file,
            label=label,
            nice=nice,
        )
    else:
        # one go build for all of them shares the compile work and keeps both cores busy
        pkgs = [pkg for pkg, _ in component.binaries]
        _run_go(
            [*args, "-o", str(tmp_out) + "/", *pkgs],
            cwd=workdir,
            log_file=log_file,
            label=label,
            nice=nice,
        )
        for pkg, name in component.binaries:
            built = tmp_out / pkg.rsplit("/", 1)[-1]
            if built.name != name and built.exists():
                built.rename(tmp_out / name)
    for name in names:
        if not (tmp_out / name).is_file():
            raise BuildError(f"{label}: go build succeeded but produced no {name}")

    versions = _check_version(component, tmp_out)
    elapsed = time.monotonic() - started
    size = sum(p.stat().st_size for p in tmp_out.iterdir())
    (tmp_out / STAMP).write_text(
        json.dumps(
            {
                "recipe": component.recipe(),
                "versions": versions,
                "built_at": dt.datetime.now(dt.UTC).isoformat(),
                "build_seconds": round(elapsed, 1),
                "bytes": size,
            },
            indent=2,
        )
        + "\n"
    )
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp_out.rename(out_dir)
    log(f"{label}: built in {elapsed / 60:.1f} min, {size / 2**20:.0f} MiB -> {out_dir}")
    return out_dir


@contextlib.contextmanager
def build_lock(name: str = "build.lock") -> Iterator[None]:
    """Serialise builders (two test sessions starting at once must not race on the cache).

    The control plane shares one lock; each operator has its own (``build-<name>.lock``), so an
    operator can be built while the control plane build of another session is running.
    """
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with (root / name).open("w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another build holds the cache lock {name}; waiting for it")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_component(component: Component, *, force: bool = False, nice: int = 0) -> Path:
    """Build one component under its own lock (two processes never build it at once)."""
    with build_lock(f"build-{component.dir_name}.lock"):
        return build_component(component, force=force, nice=nice)


PREBUILD_LOCK = "prebuild.lock"


@contextlib.contextmanager
def prebuilding() -> Iterator[None]:
    """Held by ``python -m kqueue.localcluster.prebuild`` while it runs: a test session started
    beside it (hack/test.sh) leaves the builds it will make to it and waits for each only where
    a test needs it (tests/fixtures/operators.py)."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with (root / PREBUILD_LOCK).open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def prebuild_running() -> bool:
    """True while a prebuild holds :data:`PREBUILD_LOCK` (another process, or this one)."""
    path = cache_dir() / PREBUILD_LOCK
    if not path.exists():
        return False
    with path.open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


def ensure_binaries(
    *, force: bool = False, only: list[str] | None = None, tools: bool = False
) -> Path:
    """Build what is missing of the control plane (and, with ``tools``, of the tools too) and
    return a directory holding its binaries as symlinks, with those of the tools already built.
    With ``only``, build those components and return the directory of the first.

    ``KQUEUE_BIN_DIR`` names a directory of ready binaries to use instead (no build): for
    binaries built elsewhere, or a fallback such as Debian's etcd linked in beside the rest.
    """
    override = os.environ.get("KQUEUE_BIN_DIR")
    if override and not only:
        log(f"using binaries from KQUEUE_BIN_DIR={override} (nothing is built)")
        return Path(override)
    every = components()
    if only:
        unknown = set(only) - {c.name for c in every}
        if unknown:
            raise BuildError(f"unknown component(s): {', '.join(sorted(unknown))}")
        built = [ensure_component(c, force=force) for c in every if c.name in only]
        return built[0]
    # Each component builds under its own lock; the shared lock guards only the set's links,
    # so a session waiting here for the Kubernetes build never holds up one that needs helm.
    # A cluster never waits for a tool's build (in `make test` helm builds at a lower priority
    # while the cluster tests run: kqueue.localcluster.prebuild).
    dirs = {
        c.name: ensure_component(c, force=force) for c in every if c.control_plane or tools
    }
    for c in every:
        out_dir = cache_dir() / "bin" / c.dir_name
        if c.name not in dirs and stamp_ok(c, out_dir):
            dirs[c.name] = out_dir
    with build_lock():
        set_dir = cache_dir() / "bin" / set_dir_name()
        set_dir.mkdir(parents=True, exist_ok=True)
        for c in every:
            if c.name not in dirs:
                continue
            for _, name in c.binaries:
                link = set_dir / name
                target = dirs[c.name] / name
                if link.is_symlink() and Path(os.readlink(link)) == target:
                    continue
                link.unlink(missing_ok=True)
                link.symlink_to(target)
        return set_dir


def tool(name: str) -> Path:
    """The path of a tool's binary (helm), built first if missing, waiting under its lock for
    a build another process is making."""
    override = os.environ.get("KQUEUE_BIN_DIR")
    if override and (Path(override) / name).is_file():
        return Path(override) / name
    component = next((c for c in components() if any(b == name for _, b in c.binaries)), None)
    if component is None:
        raise BuildError(f"no component builds {name!r}")
    return ensure_component(component) / name


def binaries_ready() -> Path | None:
    """The binary directory if the control plane is already built, without building or
    locking."""
    override = os.environ.get("KQUEUE_BIN_DIR")
    if override:
        return Path(override)
    set_dir = cache_dir() / "bin" / set_dir_name()
    for c in components():
        if c.control_plane and not stamp_ok(c, cache_dir() / "bin" / c.dir_name):
            return None
    return set_dir if set_dir.is_dir() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kqueue.localcluster.build",
        description="Build (or reuse) kube-apiserver, kube-controller-manager, kube-scheduler, "
        "kubectl, etcd, kwok and helm from their Go modules.",
    )
    parser.add_argument("--print-dir", action="store_true", help="print the binary directory")
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    parser.add_argument(
        "--only",
        action="append",
        choices=[c.name for c in components()],
        help="build only this component (repeatable)",
    )
    ns = parser.parse_args(argv)
    started = time.monotonic()
    try:
        bin_dir = ensure_binaries(force=ns.force, only=ns.only, tools=True)
    except BuildError as exc:
        log(f"FAILED: {exc}")
        return 1
    log(f"all done in {(time.monotonic() - started) / 60:.1f} min; binaries in {bin_dir}")
    if ns.print_dir:
        print(bin_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
