/* test_keyfile.c — the cluster's key file (src/server/keyfile.h) and the handshake's proofs
 * (src/net/auth.h): keyfile-1.x.
 *
 *   1.1  create then read: the same name, secret and keys; mode 0600; never overwritten
 *   1.2  refused: missing, open to group or others, malformed (each line missing, repeated, a short
 *        ID, a secret of the wrong length, a stray line), with a message naming the file
 *   1.3  proofs: a client proof verifies with the cluster name only, a member proof only with the
 *        member key; another name, another secret, a flipped bit, the wrong direction or class
 *        all fail with the right error
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/keyfile.h"
#include "test.h"

static void write_text(const char *path, const char *text, mode_t mode) {
    unlink(path);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs(text, f);
    fclose(f);
    ASSERT_EQ(chmod(path, mode), 0);
}

/* keyfile-1.1 */
TEST(keyfile_1_1_create_read) {
    char *dir = rl_test_tmpdir("keyfile");
    char path[4200];
    ASSERT_OK(rl__keyfile_in_dir(dir, path, sizeof path));
    rl__keyfile made, read;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__keyfile_create(path, "reclayer", &made, &msg));
    struct stat st;
    ASSERT_EQ(stat(path, &st), 0);
    ASSERT_EQ(st.st_mode & 0777, 0600);
    ASSERT_OK(rl__keyfile_read(path, &read, &msg));
    ASSERT_STR_EQ(read.name, made.name);
    ASSERT_MEM_EQ(read.secret, sizeof read.secret, made.secret, sizeof made.secret);
    ASSERT_MEM_EQ(&read.auth, sizeof read.auth, &made.auth, sizeof made.auth);
    ASSERT_TRUE(read.auth.has_member_key);
    const char *colon = strchr(read.name, ':');
    ASSERT_NOT_NULL(colon);
    ASSERT_TRUE(rl__auth_id_ok(colon + 1, strlen(colon + 1)));
    /* Two clusters never share a name or a secret. */
    rl__keyfile other;
    char path2[4300];
    snprintf(path2, sizeof path2, "%s/other.key", dir);
    ASSERT_OK(rl__keyfile_create(path2, "reclayer", &other, &msg));
    ASSERT_TRUE(strcmp(other.name, made.name) != 0);
    ASSERT_TRUE(memcmp(other.secret, made.secret, sizeof made.secret) != 0);
    /* Never overwritten. */
    ASSERT_RC(rl__keyfile_create(path, "reclayer", NULL, &msg), RL_E_ALREADY_EXISTS);
    ASSERT_OK(rl__keyfile_read(path, &read, &msg));
    ASSERT_STR_EQ(read.name, made.name);
    ASSERT_RC(rl__keyfile_create(path2, "bad description!", NULL, &msg), RL_E_INVALID_ARGUMENT);
    char beside[4300];
    snprintf(beside, sizeof beside, "%s/reclayer.cluster", dir);
    char got[4300];
    ASSERT_OK(rl__keyfile_next_to(beside, got, sizeof got));
    ASSERT_STR_EQ(got, path);
    rl_test_rmtree(dir);
    free(dir);
}

/* keyfile-1.2 */
TEST(keyfile_1_2_refused) {
    char *dir = rl_test_tmpdir("keyfile");
    char path[4200];
    snprintf(path, sizeof path, "%s/k", dir);
    rl__keyfile k;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_RC(rl__keyfile_read(path, &k, &msg), RL_E_FILE_NOT_FOUND);
    const char *good = "cluster reclayer:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef\n"
                       "secret 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n";
    write_text(path, good, 0600);
    ASSERT_OK(rl__keyfile_read(path, &k, &msg));
    write_text(path, good, 0640);
    rl__errdetail_clear(&msg);
    ASSERT_RC(rl__keyfile_read(path, &k, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "chmod 600"));
    static const char *bad[] = {
        "secret 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n",
        "cluster reclayer:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef\n",
        "cluster reclayer:ABCDEFGHIJKLMNOPQRSTUVWXYZabcde\n" /* 31 characters */
        "secret 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n",
        "cluster reclayer:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef\nsecret 0001\n",
        "cluster reclayer:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef\n"
        "cluster reclayer:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef\n"
        "secret 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n",
        "cluster reclayer:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef\n"
        "secret 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n"
        "secret 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n",
        "cluster reclayer:ABCDEFGHIJKLMNOPQRSTUVWXYZabcde-\n"
        "secret 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n",
        "cluster reclayer:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef\n"
        "secret 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\nport 4500\n",
        "cluster noid\nsecret 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(path, bad[i], 0600);
        rl__errdetail_clear(&msg);
        if (rl__keyfile_read(path, &k, &msg) != RL_E_INVALID_ARGUMENT) fail_msg("bad key file %zu accepted", i);
        ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), path));
        static const rl__keyfile zero;
        ASSERT_MEM_EQ(&k, sizeof k, &zero, sizeof zero);
    }
    rl_test_rmtree(dir);
    free(dir);
}

/* keyfile-1.3 */
TEST(keyfile_1_3_proofs) {
    const char *name = "reclayer:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef",
               *name2 = "reclayer:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdeg";
    uint8_t secret[RL_AUTH_SECRET_LEN], secret2[RL_AUTH_SECRET_LEN];
    memset(secret, 7, sizeof secret);
    memset(secret2, 7, sizeof secret2);
    secret2[31] = 8;
    rl__net_auth member, client, other_name, other_secret;
    ASSERT_OK(rl__auth_init(&member, name, strlen(name), secret, sizeof secret));
    ASSERT_OK(rl__auth_init(&client, name, strlen(name), NULL, 0));
    ASSERT_OK(rl__auth_init(&other_name, name2, strlen(name2), secret, sizeof secret));
    ASSERT_OK(rl__auth_init(&other_secret, name, strlen(name), secret2, sizeof secret2));
    ASSERT_RC(rl__auth_init(&client, name, strlen(name), secret, 5), RL_E_INVALID_ARGUMENT);
    ASSERT_OK(rl__auth_init(&client, name, strlen(name), NULL, 0));
    ASSERT_MEM_EQ(client.cluster_key, RL_AUTH_KEY_LEN, member.cluster_key, RL_AUTH_KEY_LEN);
    uint8_t sn[RL_AUTH_NONCE_LEN], cn[RL_AUTH_NONCE_LEN], p[RL_AUTH_PROOF_LEN];
    ASSERT_OK(rl__auth_random(sn, sizeof sn));
    ASSERT_OK(rl__auth_random(cn, sizeof cn));
    /* A client proof: the server (member key) checks it; another name does not pass. */
    ASSERT_OK(rl__auth_proof(&client, RL_AUTH_CLIENT, 'C', sn, cn, p));
    ASSERT_OK(rl__auth_verify(&member, RL_AUTH_CLIENT, 'C', sn, cn, p));
    ASSERT_RC(rl__auth_verify(&other_name, RL_AUTH_CLIENT, 'C', sn, cn, p), RL_E_INVALID_CLUSTER_ID);
    ASSERT_RC(rl__auth_verify(&member, RL_AUTH_CLIENT, 'S', sn, cn, p), RL_E_INVALID_CLUSTER_ID); /* reflected */
    ASSERT_RC(rl__auth_verify(&member, RL_AUTH_MEMBER, 'C', sn, cn, p), RL_E_UNAUTHORIZED_ATTEMPT);
    ASSERT_RC(rl__auth_verify(&member, RL_AUTH_CLIENT, 'C', cn, sn, p), RL_E_INVALID_CLUSTER_ID); /* nonces swapped */
    p[0] ^= 1;
    ASSERT_RC(rl__auth_verify(&member, RL_AUTH_CLIENT, 'C', sn, cn, p), RL_E_INVALID_CLUSTER_ID);
    /* A member proof: only the member key makes it, only the same secret and name check it. */
    ASSERT_RC(rl__auth_proof(&client, RL_AUTH_MEMBER, 'C', sn, cn, p), RL_E_UNAUTHORIZED_ATTEMPT);
    ASSERT_OK(rl__auth_proof(&member, RL_AUTH_MEMBER, 'C', sn, cn, p));
    ASSERT_OK(rl__auth_verify(&member, RL_AUTH_MEMBER, 'C', sn, cn, p));
    ASSERT_RC(rl__auth_verify(&other_secret, RL_AUTH_MEMBER, 'C', sn, cn, p), RL_E_UNAUTHORIZED_ATTEMPT);
    ASSERT_RC(rl__auth_verify(&other_name, RL_AUTH_MEMBER, 'C', sn, cn, p), RL_E_UNAUTHORIZED_ATTEMPT);
    ASSERT_RC(rl__auth_verify(&member, RL_AUTH_CLIENT, 'C', sn, cn, p), RL_E_INVALID_CLUSTER_ID);
    ASSERT_RC(rl__auth_proof(&member, 3, 'C', sn, cn, p), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__auth_proof(&member, RL_AUTH_CLIENT, 'X', sn, cn, p), RL_E_INVALID_ARGUMENT);
    /* IDs: 32 letters and digits at least. */
    char id[RL_AUTH_ID_MIN + 1];
    ASSERT_OK(rl__auth_random_id(id, RL_AUTH_ID_MIN));
    ASSERT_TRUE(rl__auth_id_ok(id, strlen(id)));
    ASSERT_FALSE(rl__auth_id_ok(id, RL_AUTH_ID_MIN - 1));
    ASSERT_FALSE(rl__auth_id_ok("ABCDEFGHIJKLMNOPQRSTUVWXYZabcde_", 32));
}

RL_TEST_MAIN(T(keyfile_1_1_create_read), T(keyfile_1_2_refused), T(keyfile_1_3_proofs))
