/* SPDX-License-Identifier: BSD-3-Clause */
/* discardcache tests, sanitizer builds only: preloaded into nbdkit
 * after the sanitizer runtime (tests/functions.sh), this makes exit,
 * whether called or returned from main, end the process with _exit
 * once nbdkit's own exit handlers have run, skipping the library
 * destructors.
 *
 * Why: with an ASan or TSan runtime preloaded, nbdkit 1.32 hangs in
 * exit once an error has been logged with %m: libp11-kit's destructor
 * (p11-kit comes with gnutls) calls freelocale, which waits forever on
 * glibc's __libc_setlocale_lock, found with its reader count at -1.
 * nbdkit's own file plugin does it too (nbdkit file /nonexistent under
 * LD_PRELOAD=libasan.so), so it is not ours, but a test that stops
 * nbdkit would wait 60 s and fail.  Skipping the destructors loses
 * nothing the tests check: the plugin's cleanup and unload have run,
 * sanitizer reports are written when errors happen (halt_on_error),
 * and leak checking of nbdkit is off.  Built without sanitizer flags.
 *
 * How: glibc runs exit handlers newest first, and registers the dynamic
 * linker's destructor pass (_dl_fini) in __libc_start_main, after the
 * constructors of preloaded libraries have run but before main.  So the
 * handler is registered from a wrapper around main (installed through
 * __libc_start_main, the usual preload trick): it runs after nbdkit's
 * own handlers and before _dl_fini.  on_exit, unlike atexit, is told
 * the exit status.
 */
#include <config.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*main_fn) (int, char **, char **);
typedef int (*start_fn) (main_fn, int, char **, void (*) (void),
                         void (*) (void), void (*) (void), void *);

static main_fn real_main;

/* Interposed, so declared here rather than left to libc's headers. */
int __libc_start_main (main_fn main, int argc, char **argv,
                       void (*init) (void), void (*fini) (void),
                       void (*rtld_fini) (void), void *stack_end);

static void
skip_destructors (int status, void *unused)
{
  fflush (NULL);
  _exit (status);
}

static int
wrapped_main (int argc, char **argv, char **envp)
{
  on_exit (skip_destructors, NULL);
  return real_main (argc, argv, envp);
}

int
__libc_start_main (main_fn main, int argc, char **argv, void (*init) (void),
                   void (*fini) (void), void (*rtld_fini) (void),
                   void *stack_end)
{
  start_fn real = (start_fn) dlsym (RTLD_NEXT, "__libc_start_main");

  if (real == NULL)
    abort ();
  real_main = main;
  return real (wrapped_main, argc, argv, init, fini, rtld_fini, stack_end);
}
