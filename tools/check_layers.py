#!/usr/bin/env python3
"""Fails if the tree breaks its layering: a file including a header of a
higher layer or of another op family, or a family missing from a layer.

Layers, lowest first (a file may include only its own layer and lower ones):
  runtime/src:  core < exec < memory < kernels < collectives < api < compiler
                (collectives uses only kernels/common of the kernels layer)
  csrc:         runtime < launch, registry, distributed < aten, amp, python
Families: every runtime/include/nrt/ops/<family>.h is one op family. Its
kernels live in runtime/src/kernels/<family>/ (the pointwise-kind families
special and nn in kernels/pointwise/<family>/), its glue in
csrc/aten/<family>.cpp, its tests in runtime/tests/test_<family>*.c and
tests/test_<family>*.py. A family's files include no other family's
header; what families share lives in runtime/src/kernels/common/.

With --objects DIR (the runtime's object files, e.g. build/rt) it also
checks calls: no object uses a symbol defined in a higher layer or in
another family's folder (nm's view, so a call through a hand-written
prototype is caught too).

Usage: python3 tools/check_layers.py [--objects build/rt]   (exit status 1 on a violation)
"""
import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# compiler/ (graph capture, passes, programs) runs steps through the api's
# dispatch, so it sits above it; the lower layers reach the capture only
# through the observer registered in exec/capture_link.c.
# collectives/ (shared-memory transport of torch.distributed) reduces with
# kernels/common's conversions and ISA switch, never a family's kernels.
RUNTIME_LAYERS = ["core", "exec", "memory", "kernels", "collectives", "api", "compiler"]
CSRC_LAYERS = {"runtime": 0, "launch": 1, "registry": 1, "aten": 2, "amp": 2, "distributed": 1, "python": 2}
# Families whose rows run on the pointwise engine live under kernels/pointwise/.
POINTWISE_FAMILIES = {"special", "nn", "distributions"}


def families():
    return sorted(p.stem for p in (ROOT / "runtime/include/nrt/ops").glob("*.h"))


def includes(path):
    return INCLUDE.findall(path.read_text(errors="replace"))


def runtime_family(rel):
    """The family a runtime/src/kernels file belongs to: its folder under
    kernels/ (special/ and nn/ under pointwise/ count as theirs), or None
    for kernels/common and kernels/kernels.h."""
    parts = rel.parts  # ('kernels', fam, ...)
    if len(parts) < 3 or parts[1] == "common":
        return None
    if parts[1] == "pointwise" and len(parts) >= 4 and parts[2] in POINTWISE_FAMILIES:
        return parts[2]
    return parts[1]


def check_runtime(errors):
    src = ROOT / "runtime/src"
    fams = set(families())
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".c", ".h"):
            continue
        rel = path.relative_to(src)
        layer = rel.parts[0]
        if layer not in RUNTIME_LAYERS:
            errors.append(f"runtime/src/{rel}: not in a layer folder ({', '.join(RUNTIME_LAYERS)})")
            continue
        mine = RUNTIME_LAYERS.index(layer)
        fam = runtime_family(rel) if layer == "kernels" else None
        for inc in includes(path):
            top = inc.split("/")[0]
            if top in RUNTIME_LAYERS:
                if RUNTIME_LAYERS.index(top) > mine:
                    errors.append(f"runtime/src/{rel}: includes {inc}, a header of a higher layer")
                if layer == "kernels" and top == "kernels":
                    other = runtime_family(pathlib.PurePosixPath(inc))
                    if other is not None and other != fam and not (fam == "pointwise" and other in POINTWISE_FAMILIES) \
                            and not (other == "pointwise" and fam in POINTWISE_FAMILIES):
                        errors.append(f"runtime/src/{rel}: includes {inc}, a header of family {other}")
                    if fam is None and other is not None:
                        errors.append(f"runtime/src/{rel}: kernels/common must not include family header {inc}")
                if layer == "collectives" and top == "kernels" and not inc.startswith("kernels/common/"):
                    errors.append(f"runtime/src/{rel}: includes {inc}; collectives may use only kernels/common")
            elif inc.startswith("nrt/ops/"):
                other = pathlib.PurePosixPath(inc).stem
                allowed = layer in ("api", "compiler") or rel == pathlib.PurePosixPath("core/ops.c") or other == fam \
                    or (fam == "pointwise" and other in POINTWISE_FAMILIES)
                if not allowed:
                    errors.append(f"runtime/src/{rel}: includes {inc} (another family's ops)")
            elif top != "nrt" and not (path.parent / inc).exists():
                errors.append(f"runtime/src/{rel}: includes {inc}, which is not a runtime header")
    for fam in sorted(fams):
        folder = src / "kernels" / ("pointwise/" + fam if fam in POINTWISE_FAMILIES else fam)
        if not folder.is_dir():
            errors.append(f"family {fam}: no kernel folder {folder.relative_to(ROOT)}")
        if not list((ROOT / "runtime/tests").glob(f"test_{fam}*.c")):
            errors.append(f"family {fam}: no C test runtime/tests/test_{fam}*.c")


def check_csrc(errors):
    csrc = ROOT / "csrc"
    if not (csrc / "aten").is_dir():
        errors.append("csrc/aten/ does not exist (glue per family)")
        return
    fams = set(families())
    for path in sorted(csrc.rglob("*")):
        if path.suffix not in (".cpp", ".h"):
            continue
        rel = path.relative_to(csrc)
        if rel.as_posix() == "pch.h":
            # the build's precompiled header: PyTorch headers only, no layer
            for inc in includes(path):
                if inc.split("/")[0] in CSRC_LAYERS or inc.startswith("nrt/"):
                    errors.append(f"csrc/pch.h: includes {inc}; it may hold PyTorch headers only")
            continue
        if len(rel.parts) < 2 or rel.parts[0] not in CSRC_LAYERS:
            errors.append(f"csrc/{rel}: not in a concern folder ({', '.join(CSRC_LAYERS)})")
            continue
        mine = CSRC_LAYERS[rel.parts[0]]
        stem = rel.stem.split("_")[0]
        for inc in includes(path):
            top = inc.split("/")[0]
            if top in CSRC_LAYERS and CSRC_LAYERS[top] >= 2 and top != rel.parts[0]:
                errors.append(f"csrc/{rel}: includes {inc} from a top-level folder")
            elif top in CSRC_LAYERS and CSRC_LAYERS[top] > mine:
                errors.append(f"csrc/{rel}: includes {inc}, a header of a higher layer")
            if top == "aten" and rel.parts[0] == "aten":
                errors.append(f"csrc/{rel}: includes {inc}: glue files do not include each other")
            if inc.startswith("nrt/ops/"):
                other = pathlib.PurePosixPath(inc).stem
                if rel.parts[0] != "aten" or other != stem:
                    errors.append(f"csrc/{rel}: includes {inc} (another family's ops)")
            if top in RUNTIME_LAYERS or inc.endswith("internal.h"):
                errors.append(f"csrc/{rel}: includes runtime-internal header {inc}")
    for fam in sorted(fams):
        if not list((csrc / "aten").glob(f"{fam}*.cpp")):
            errors.append(f"family {fam}: no glue csrc/aten/{fam}.cpp")
        if not list((ROOT / "tests").glob(f"test_{fam}*.py")):
            errors.append(f"family {fam}: no pytest tests/test_{fam}*.py")


def check_objects(objdir, errors):
    """Calls between the runtime's objects follow the same rules as includes."""
    defined, used = {}, []
    for obj in sorted(objdir.rglob("*.o")):
        rel = obj.relative_to(objdir).with_suffix(".c")
        if not (ROOT / "runtime/src" / rel).exists():
            continue  # a stale object of a moved source
        out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBR":
                defined[parts[2]] = rel
            elif len(parts) == 2 and parts[0] == "U":
                used.append((rel, parts[1]))
    for rel, sym in used:
        home = defined.get(sym)
        if home is None or home == rel:
            continue
        mine, theirs = rel.parts[0], home.parts[0]
        if mine not in RUNTIME_LAYERS or theirs not in RUNTIME_LAYERS:
            continue
        if RUNTIME_LAYERS.index(theirs) > RUNTIME_LAYERS.index(mine):
            errors.append(f"runtime/src/{rel}: calls {sym} of a higher layer (runtime/src/{home})")
        elif mine == theirs == "kernels":
            a, b = runtime_family(rel), runtime_family(home)
            if b is not None and a != b and not ({a, b} <= {"pointwise"} | POINTWISE_FAMILIES):
                errors.append(f"runtime/src/{rel}: calls {sym} of family {b} (runtime/src/{home})")
            if a is None and b is not None:
                errors.append(f"runtime/src/{rel}: kernels/common calls {sym} of family {b}")
        elif mine == "collectives" and theirs == "kernels" and runtime_family(home) is not None:
            errors.append(f"runtime/src/{rel}: calls {sym} of family {runtime_family(home)} (runtime/src/{home}); "
                          "collectives may use only kernels/common")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--objects", type=pathlib.Path, help="runtime object folder to check calls in")
    args = ap.parse_args()
    errors = []
    check_runtime(errors)
    check_csrc(errors)
    if args.objects:
        check_objects(args.objects, errors)
    for e in errors:
        print("layering:", e)
    if errors:
        print(f"{len(errors)} layering violation(s)")
        return 1
    print(f"layering: ok ({len(families())} op families)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
