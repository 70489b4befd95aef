"""Plugins: samplers, losses, models, formats and metrics from outside recx, registered through the same public
decorators the built-ins use (`recx.register_sampler`, ... : the registries' `register`).

Where they come from, loaded once, before any name is looked up (the first read of any registry loads them):
- installed packages that declare an entry point in the group `recx.plugins` naming a module, e.g. in pyproject.toml
  `[project.entry-points."recx.plugins"] my_methods = "my_package.methods"`;
- `RECX_PLUGINS`: module names, `.py` files or package folders, separated by the path separator (`:`);
- `--plugin PATH_OR_MODULE` on the command line (repeatable) or `recx.use_plugins(...)` from Python (`request`).
A local file is imported as the module `recx_plugin_<its stem>`, a package folder (one with `__init__.py`) as the
package of its folder's name. A plugin that fails to import is one RecxError naming it and the import error; a
name that clashes with a built-in or another plugin's is refused by the registry with both owners named. Each run
records the plugins loaded (`recorded()`: name, source, module, version, the sha256 of its code and the names it
registered) in its environment.json, and a sweep's workers load the same ones (`worker_specs()`).

A plugin's code (`code_hash`): the sha256 of the module files of the top-level package a registered class comes from
(its folder's `.py` files, their relative paths and contents in order: `content_hash`), or of its module's file when
that is a single module. The same package gives the same hash whether it is loaded with `--plugin FOLDER` or
installed (entry point, module name), so a run's identity (RunConfig.plugin_code) follows the code, not how it was
loaded; a single `.py` file and a package holding a copy of it are other code.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from recx.core.errors import RecxError

GROUP = "recx.plugins"
ENV = "RECX_PLUGINS"


@dataclass(frozen=True)
class Plugin:
    name: str  # the entry point's name, the module's name or the file's path
    source: str  # "entry point", "module", "file" or "folder"
    module: str  # the module it was imported as
    version: str | None = None  # its distribution's version (entry points and installed modules)
    sha256: str | None = None  # its code: a local file's content, else its package's module files (code_hash)
    names: tuple[str, ...] = ()  # what it registered: "sampler mixture", "metric map", ...

    def describe(self) -> str:
        detail = self.version and f" {self.version}" or self.sha256 and f" sha256 {self.sha256[:12]}" or ""
        return f"plugin {self.name}{detail}"


_requested: list[str] = []
_loaded: list[Plugin] = []
_current: list[str] = []  # the plugin being imported (a stack: a plugin may request another)
_registered: dict[str, list[str]] = {}  # plugin label -> "kind name" it registered while being imported
_started = False
_hashes: dict[str, str | None] = {}  # a module's file or package folders -> code_hash (its code is loaded once)


def loading_now() -> str | None:
    """`plugin <name>` while a plugin's module is being imported, else None (the registries' owner of a name)."""
    return f"plugin {_current[-1]}" if _current else None


def note_registered(kind: str, name: str) -> None:
    """A registry registered `name` of `kind` for the plugin being imported (recorded in its `names`)."""
    if _current:
        _registered.setdefault(_current[-1], []).append(f"{kind} {name}")


def code_hash(module_name: str) -> str | None:
    """The sha256 of the code a class of module `module_name` comes from: its top-level package's `.py` files
    (`content_hash` of the package folder), or its module's file; None when the module has no source file."""
    import hashlib

    module = sys.modules.get(module_name.split(".")[0])
    folders = sorted(getattr(module, "__path__", None) or [])
    source = getattr(module, "__file__", None)
    key = "\0".join(folders) if folders else str(source)
    if key not in _hashes:
        if folders:
            digests = [content_hash(Path(folder)) for folder in folders]
            _hashes[key] = digests[0] if len(digests) == 1 else hashlib.sha256("".join(digests).encode()).hexdigest()
        elif source and Path(source).is_file():
            _hashes[key] = content_hash(Path(source))
        else:
            _hashes[key] = None
    return _hashes[key]


def plugin_of(module_name: str) -> Plugin | None:
    """The loaded plugin whose module (or package) holds `module_name`, if any."""
    for plugin in _loaded:
        if module_name == plugin.module or module_name.startswith(plugin.module + "."):
            return plugin
    top = module_name.split(".")[0]
    return next((plugin for plugin in _loaded if plugin.module.split(".")[0] == top), None)


def _environment_specs() -> list[str]:
    return [part for part in os.environ.get(ENV, "").split(os.pathsep) if part.strip()]


def _is_file(spec: str) -> bool:
    """A path (a `.py` file or a package folder), not a module name."""
    return spec.endswith(".py") or os.sep in spec or Path(spec).exists()


def _normalised(spec: str) -> str:
    return str(Path(spec).expanduser().resolve()) if _is_file(spec) else spec


def request(*specs: str) -> None:
    """Ask for plugins by module name or `.py` file: loaded with the others, or at once when loading has begun."""
    for spec in map(_normalised, specs):
        if spec not in _requested:
            _requested.append(spec)
            if _started:
                _load_spec(spec, "requested")


def pop_plugin_options(argv: list[str]) -> tuple[list[str], list[str]]:
    """(`argv` without its `--plugin X` / `--plugin=X` options, the X's in order)."""
    kept: list[str] = []
    specs: list[str] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--plugin":
            if index + 1 == len(argv):
                raise RecxError("--plugin: expected a module name or a .py file")
            specs.append(argv[index + 1])
            index += 2
            continue
        if arg.startswith("--plugin="):
            specs.append(arg.partition("=")[2])
        else:
            kept.append(arg)
        index += 1
    return kept, specs


def worker_specs() -> list[str]:
    """What a sweep's worker (a fresh process) must load besides the entry points: RECX_PLUGINS and the requested."""
    return list(dict.fromkeys([*map(_normalised, _environment_specs()), *_requested]))


def load() -> None:
    """Load every plugin once: the entry points, then RECX_PLUGINS, then the requested ones."""
    global _started
    import importlib.metadata

    if _started:
        return
    _started = True
    for entry in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: e.name):
        dist = entry.dist
        label = f"{entry.name} (entry point of {dist.name if dist else '?'})"
        load_entry = functools.partial(importlib.import_module, entry.module)
        _import(label, "entry point", entry.name, load_entry, dist.version if dist else None)
    for spec in _environment_specs():
        _load_spec(_normalised(spec), f"from {ENV}")
    for spec in list(_requested):
        _load_spec(spec, "requested")


def _load_spec(spec: str, origin: str) -> None:
    if any(plugin.name == spec for plugin in _loaded):
        return
    if _is_file(spec):
        path = Path(spec)
        package = path.is_dir() and (path / "__init__.py").is_file()
        if not path.is_file() and not package:
            raise RecxError(f"plugin {spec} ({origin}): no such file, nor a package folder (with __init__.py)")
        name = path.name if package else "recx_plugin_" + re.sub(r"\W", "_", path.stem)
        entry = path / "__init__.py" if package else path
        if name in sys.modules and getattr(sys.modules[name], "__file__", None) != str(entry):
            raise RecxError(
                f"plugin {spec} ({origin}): another module of the name {name!r} ({sys.modules[name].__file__}) is "
                "loaded; rename one of them"
            )
        loader = functools.partial(_import_file, name, entry, path if package else None)
        _import(spec, "folder" if package else "file", name, loader, sha256=content_hash(path))
        return
    _import(spec, "module", spec, functools.partial(importlib.import_module, spec), _module_version(spec))


def content_hash(path: Path) -> str:
    """sha256 of a file, or of a folder's `.py` files (their paths and contents, in order)."""
    import hashlib

    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    digest = hashlib.sha256()
    for file in sorted(path.rglob("*.py")):
        digest.update(str(file.relative_to(path)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def _import_file(name: str, path: Path, package: Path | None = None):
    """Import `path` as module `name` (`package`: a package folder, its __init__.py being `path`)."""
    locations = [str(package)] if package is not None else None
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=locations)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _module_version(name: str) -> str | None:
    import importlib.metadata

    top = name.split(".")[0]
    dists = importlib.metadata.packages_distributions().get(top, [])
    try:
        return importlib.metadata.version(dists[0]) if dists else None
    except importlib.metadata.PackageNotFoundError:
        return None


def _import(label: str, source: str, module: str, do_import, version=None, sha256=None) -> None:
    _current.append(label)
    try:
        imported = do_import()
    except RecxError:
        raise
    except ModuleNotFoundError as exc:
        if source == "module" and exc.name == module.split(".")[0]:
            raise RecxError(
                f"plugin {label}: no module named {module!r} is installed (nor a file of that name)"
            ) from None
        raise RecxError(f"plugin {label} failed to import: {type(exc).__name__}: {exc}") from None
    except Exception as exc:
        raise RecxError(f"plugin {label} failed to import: {type(exc).__name__}: {exc}") from None
    except SystemExit as exc:  # it would end recx, with its exit status and no word
        raise RecxError(
            f"plugin {label} called sys.exit({exc.code!r}) while it was imported; a plugin's module should only "
            "define and register its classes"
        ) from None
    finally:
        _current.pop()
    name = getattr(imported, "__name__", module)
    names = tuple(_registered.pop(label, []))
    _loaded.append(Plugin(label, source, name, version, sha256 or code_hash(name), names))


def loaded() -> list[Plugin]:
    return list(_loaded)


def recorded() -> list[dict]:
    """The plugins loaded, as environment.json records them."""
    return [asdict(plugin) for plugin in _loaded]


def may_declare_entry_points() -> bool:
    """False when no installed distribution declares an entry point of GROUP. The entry_points.txt files that
    importlib.metadata reads (in the .dist-info and .egg-info folders of sys.path's folders, and a .egg folder's
    EGG-INFO) are searched for the group's name, without importing importlib.metadata: that import was a quarter
    of what recx itself adds to `recx --help` (docs/performance.md). True, for importlib.metadata to answer, when
    one may declare it, or when unsure (a zip file on sys.path, a finder of distributions other than Python's)."""
    finders = [finder for finder in sys.meta_path if getattr(finder, "find_distributions", None) is not None]
    if any(not _reads_sys_path(finder) for finder in finders):
        return True
    for entry in sys.path:
        root = entry or "."
        try:
            children = os.listdir(root)
        except NotADirectoryError:
            return True
        except OSError:
            continue
        egg = os.path.basename(root).lower().endswith(".egg")
        for child in children:
            low = child.lower()
            if not (low.endswith((".dist-info", ".egg-info")) or (egg and low == "egg-info")):
                continue
            try:
                with open(os.path.join(root, child, "entry_points.txt"), "rb") as declared:
                    if GROUP.encode() in declared.read():
                        return True
            except OSError:
                continue
    return False


def _reads_sys_path(finder) -> bool:
    """Whether a finder of distributions is Python's PathFinder or the importlib_metadata backport's
    MetadataPathFinder (installed on sys.meta_path when the backport is imported, as MLflow and Ray do): both read
    the .dist-info/.egg-info folders of sys.path that may_declare_entry_points searches."""
    import importlib.machinery

    kind = finder if isinstance(finder, type) else type(finder)
    backport = kind.__module__ == "importlib_metadata" and kind.__name__ == "MetadataPathFinder"
    return finder is importlib.machinery.PathFinder or backport


def fingerprint() -> str | None:
    """A hash of what would be loaded (entry points with their versions, RECX_PLUGINS and the requested specs with
    each file's content), without importing any of it: the key of the cached catalogue of plugin names. None when
    there is nothing to load."""
    found = []
    if may_declare_entry_points():
        import importlib.metadata

        found = sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: e.name)
    specs = worker_specs()
    if not found and not specs:
        return None
    import hashlib

    digest = hashlib.sha256()
    for entry in found:
        dist = entry.dist
        digest.update(
            f"{entry.name}={entry.value}@{dist.name if dist else ''}{dist.version if dist else ''}\n".encode()
        )
    for spec in specs:
        digest.update(spec.encode())
        if _is_file(spec) and Path(spec).exists():
            digest.update(content_hash(Path(spec)).encode())
    return digest.hexdigest()[:16]


def blame(error: BaseException) -> str | None:
    """`plugin P: Class.method (file, line N) raised Type: message` for the innermost frame of the error's
    traceback in a loaded plugin's code; None when no plugin code is in it."""
    found = None
    trace = error.__traceback__
    while trace is not None:
        module = trace.tb_frame.f_globals.get("__name__", "")
        plugin = plugin_of(module) if module else None
        if plugin is not None:
            found = (plugin, trace.tb_frame.f_code, trace.tb_lineno)
        trace = trace.tb_next
    if found is None:
        return None
    plugin, code, line = found
    method = getattr(code, "co_qualname", code.co_name)
    return f"{plugin.describe()}: {method} ({code.co_filename}, line {line}) raised {type(error).__name__}: {error}"
