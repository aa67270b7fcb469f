#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# discardcache: the engine knows nothing of thin mode (issue 13, item 1;
# invariant 7): no thin_* or engine_phys_* call in the engine's files,
# and the volume layer includes no engine-internal header (it drives the
# engine through engine.h only).  Below the engine (cache/engine/), the
# libraries (extmap/, cache/policy/, cache/protect/, cache/persist/) are
# pure: none of their files includes the engine's headers, so none can
# call the engine (cache/README.md).  The include paths already keep upward
# calls from compiling; these are the downward shortcuts they allow.
source "${abs_top_srcdir:-$(dirname "$0")/../..}/tests/functions.sh"

cd "$abs_top_srcdir" || fail "no source tree at $abs_top_srcdir"
engine=(cache/*/*.c extmap/*.c)
pure=(extmap/*.[ch] cache/policy/*.[ch] cache/protect/*.[ch] cache/persist/*.[ch])
for f in "${engine[@]}" "${pure[@]}"; do
    [ -f "$f" ] || fail "$f is missing: update this test's list"
done
if grep -nE '\b(thin_[A-Za-z0-9_]*|engine_phys_[A-Za-z0-9_]*)[[:space:]]*\(' \
        "${engine[@]}"; then
    fail "the engine calls thin mode (or an engine_phys_ function): above"
fi
if grep -nE '\bthin_[A-Za-z0-9_]*|\bstruct thin\b' cache/*/*.h extmap/*.h; then
    fail "the engine's headers declare thin mode's names: above"
fi
if grep -rnE '#include[[:space:]]+"(engine-internal|state|pacing|policy)\.h"' \
        volume/; then
    fail "the volume layer includes an engine-internal header: above"
fi
if grep -nE '#include[[:space:]]+"engine[a-z-]*\.h"' "${pure[@]}"; then
    fail "a library below the engine includes an engine header: above"
fi
if grep -rnE '#include[[:space:]]+"(internal|nbd-internal|rbd-internal)\.h"' \
        cache extmap volume service nbd-plugin fuse ublk tools keeper; then
    fail "a layer above backend/ includes its private header: call the backend_* functions of backend.h (above)"
fi
if ls cache/*.[ch] > /dev/null 2>&1; then
    ls cache/*.[ch]
    fail "source at the top of cache/: the engine's own files live in cache/engine/ (cache/README.md)"
fi
echo "layers: ok (${#engine[@]} engine files, volume/ through engine.h only)"
