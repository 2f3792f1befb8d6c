/* report_manifest.c — the campaign's manifest.json: what ran, on what, from which source:
 *
 *   {"format", "reclayer" (rl_version_string: release and git revision), "protocol" (the canonical protocol), "protocol_source", "protocol_sha256" (set by the
 *    runner), "command": [argv...], "binaries": [{"name", "path", "sha256"}] (rlbench, and rl and
 *    rlkvd beside it when present), "machine": {"cpu_model", "cores", "memory_bytes", "kernel"},
 *    "libraries": {"sqlite", "jansson", "protobuf_c", "xxhash", "compiler", "build"},
 *    "git": {"revision", "clean", "changed_files", "error"}, "durability": ...}
 *
 * The git facts come from `git -C <the directory of rlbench>` (a build directory inside the work
 * tree): rev-parse HEAD and status --porcelain --untracked-files=no, each with a 20 s deadline.
 * Outside a work tree they are recorded as unknown. The runner takes the manifest before the run
 * starts (campaign_run.c), so the digests and the revision are those the run began with.
 */
#include <libgen.h>
#include <string.h>
#include <unistd.h>

#include <protobuf-c/protobuf-c.h>
#include <xxhash.h>

#include "base/sha256.h"
#include "bench/campaign_int.h"
#include "bench/campaign_proc.h"
#include "reclayer/version.h"

/* Run git with args in dir; its stdout (trimmed) into out. RL_OK when it exited 0. */
static int git(const char *dir, const char *a1, const char *a2, const char *a3, rl_buf *out) {
    char *argv[] = {"git", "-C", (char *)dir, (char *)a1, (char *)a2, (char *)a3, NULL};
    rl__camp_child ch;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    int rc = rl__camp_child_run(argv, 20, &ch, &err);
    if (rc) return rc;
    if (ch.exit_code == 0) {
        rl__buf_append(out, ch.out.data, ch.out.len);
        while (out->len && (out->data[out->len - 1] == '\n' || out->data[out->len - 1] == ' '))
            rl__buf_truncate(out, out->len - 1);
    } else {
        rc = RL_E_OPERATION_FAILED;
    }
    rl__camp_child_release(&ch);
    return rc;
}

static void add_binary(json_t *arr, const char *name, const char *path) {
    char hex[RL_SHA256_HEX_LEN + 1];
    if (access(path, X_OK) != 0) return;
    if (rl__sha256_file(path, hex))
        json_array_append_new(arr, json_pack("{s:s, s:s, s:n}", "name", name, "path", path, "sha256"));
    else json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "name", name, "path", path, "sha256", hex));
}

int rl__camp_manifest(const rl__camp_run_options *o, const char *self_exe, json_t **out, rl__errdetail *err) {
    rl_buf ptext, cpu, kernel, rev, status;
    char dir[RL_CAMP_PATH_MAX], path[RL_CAMP_PATH_MAX + 16];
    uint64_t mem = 0;
    int cores = 0;
    (void)err;
    rl__buf_init(&ptext);
    rl__buf_init(&cpu);
    rl__buf_init(&kernel);
    rl__buf_init(&rev);
    rl__buf_init(&status);
    rl__camp_protocol_print(o->protocol, &ptext);
    json_t *m = json_object();
    json_object_set_new(m, "format", json_string("reclayer-campaign-manifest/1"));
    json_object_set_new(m, "reclayer", json_string(rl_version_string())); /* what --version prints */
    json_object_set_new(m, "protocol", json_loadb(rl__camp_str(&ptext), ptext.len, 0, NULL));
    json_object_set_new(m, "protocol_source", json_string(o->protocol_source ? o->protocol_source : ""));
    json_t *cmd = json_array();
    for (int i = 0; i < o->argc; i++) json_array_append_new(cmd, json_string(o->argv[i]));
    json_object_set_new(m, "command", cmd);
    snprintf(dir, sizeof dir, "%s", self_exe);
    char *d = dirname(dir);
    json_t *bins = json_array();
    add_binary(bins, "rlbench", self_exe);
    snprintf(path, sizeof path, "%s/rl", d);
    add_binary(bins, "rl", path);
    snprintf(path, sizeof path, "%s/rlkvd", d);
    add_binary(bins, "rlkvd", path);
    json_object_set_new(m, "binaries", bins);
    rl__camp_machine(&cpu, &kernel, &mem, &cores);
    json_object_set_new(m, "machine",
                        json_pack("{s:s, s:i, s:I, s:s}", "cpu_model", rl__camp_str(&cpu), "cores", cores,
                                  "memory_bytes", (json_int_t)mem, "kernel", rl__camp_str(&kernel)));
    char xxh[32];
    unsigned xv = XXH_versionNumber();
    snprintf(xxh, sizeof xxh, "%u.%u.%u", xv / 10000, xv / 100 % 100, xv % 100);
    const char *build =
#ifdef NDEBUG
        "optimised (NDEBUG)"
#else
        "assertions on"
#endif
#if defined(__SANITIZE_ADDRESS__)
        ", AddressSanitizer"
#endif
        ;
    json_object_set_new(m, "libraries",
                        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "sqlite", sqlite3_libversion(), "jansson",
                                  JANSSON_VERSION, "protobuf_c", protobuf_c_version(), "xxhash", xxh, "compiler",
                                  __VERSION__, "build", build));
    json_t *g = json_object();
    if (git(d, "rev-parse", "HEAD", NULL, &rev) == RL_OK) {
        json_object_set_new(g, "revision", json_string(rl__camp_str(&rev)));
        if (git(d, "status", "--porcelain", "--untracked-files=no", &status) == RL_OK) {
            int changed = 0;
            for (size_t i = 0; i < status.len; i++) changed += status.data[i] == '\n';
            changed += status.len > 0;
            json_object_set_new(g, "clean", json_boolean(changed == 0));
            json_object_set_new(g, "changed_files", json_integer(changed));
        }
    } else {
        json_object_set_new(g, "revision", json_null());
        json_object_set_new(g, "error", json_string("not run from a git work tree (or git is missing)"));
    }
    json_object_set_new(m, "git", g);
    json_object_set_new(m, "durability",
                        json_string("datasets written with fsync (no --no-sync); the timed loops only read"));
    *out = m;
    rl__buf_release(&ptext);
    rl__buf_release(&cpu);
    rl__buf_release(&kernel);
    rl__buf_release(&rev);
    rl__buf_release(&status);
    return RL_OK;
}
