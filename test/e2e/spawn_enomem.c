// LD_PRELOAD for e2e 111: posix_spawn and posix_spawnp of a program whose
// name starts "bgexec-e2e-enomem" fail with ENOMEM, as a kernel refusing
// that one program's memory would; every other program (the worker's
// probe, `true`) starts as usual.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <spawn.h>
#include <string.h>

typedef int (*spawn_fn)(pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*,
                        char* const[], char* const[]);

static int refused(const char* path) {
  const char* base = strrchr(path, '/');
  return strncmp(base ? base + 1 : path, "bgexec-e2e-enomem", 17) == 0;
}

int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa, const posix_spawnattr_t* attr,
                char* const argv[], char* const envp[]) {
  if (refused(path)) return ENOMEM;
  return ((spawn_fn)dlsym(RTLD_NEXT, "posix_spawn"))(pid, path, fa, attr, argv, envp);
}

int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa, const posix_spawnattr_t* attr,
                 char* const argv[], char* const envp[]) {
  if (refused(file)) return ENOMEM;
  return ((spawn_fn)dlsym(RTLD_NEXT, "posix_spawnp"))(pid, file, fa, attr, argv, envp);
}
