#define _GNU_SOURCE
#include "harness.h"

#include <sys/wait.h>
#include <unistd.h>

static sigjmp_buf probe_env;

static void on_fault(int sig)
{
    siglongjmp(probe_env, sig);
}

int probe(volatile unsigned char *addr, int write, unsigned char *val)
{
    struct sigaction sa, old_bus, old_segv;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &old_bus);
    sigaction(SIGSEGV, &sa, &old_segv);
    int sig = sigsetjmp(probe_env, 1);
    if (sig == 0) {
        if (write)
            *addr = 0x5a;
        else if (val)
            *val = *addr;
        else
            (void)*addr;
    }
    sigaction(SIGBUS, &old_bus, NULL);
    sigaction(SIGSEGV, &old_segv, NULL);
    return sig;
}

static int run_one(const struct test_case *t)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        exit(t->fn());
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return FAIL;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    fprintf(stderr, "    killed by signal %d%s\n", WTERMSIG(status),
            WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
    return FAIL;
}

int run_tests(const struct test_case *cases, size_t n, int argc, char **argv)
{
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        if (argc > 1) {
            int wanted = 0;
            for (int a = 1; a < argc; a++)
                wanted |= strcmp(argv[a], cases[i].name) == 0;
            if (!wanted)
                continue;
        }
        int r = run_one(&cases[i]);
        const char *word = r == PASS ? "PASS" : r == SKIP ? "SKIP" : "FAIL";
        printf("%s %s\n", word, cases[i].name);
        if (r == PASS)
            passed++;
        else if (r == SKIP)
            skipped++;
        else
            failed++;
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
