# SPDX-License-Identifier: BSD-3-Clause
# Helpers for the tests of what `make install` puts where, sourced after
# tests/functions.sh: make_dir VAR prints an installation directory as
# this build's Makefile has it; install_tree DEST runs make install
# DESTDIR=DEST (outside the jobserver of the make check running us).
unset MAKEFLAGS MFLAGS MAKELEVEL

make_dir ()
{
    printf 'print:\n\t@echo $(%s)\n' "$1" |
        make -s -C "$abs_top_builddir" -f Makefile -f - print
}

install_tree ()
{
    make -C "$abs_top_builddir" install DESTDIR="$1" >"$1.install.log" 2>&1 ||
        { tail -n 30 "$1.install.log"; fail "make install DESTDIR=$1 failed"; }
}
