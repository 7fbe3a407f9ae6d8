/* Tenants: keys, the tenants.db store that `airlock tenants` writes, the daemon's registry that
 * follows it through inotify, and the per-thread scope that carries a request's tenant down to
 * the session manager. Keys are 32 random bytes: a plain SHA-256 of them is as hard to invert
 * as the key is to guess, so no slow password hash is needed; lookups compare every stored
 * hash in constant time. */
#include "tenant.h"

#include "base/cleanup.h"
#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct tenant *tenant_ref(struct tenant *t)
{
        if (t)
                atomic_fetch_add(&t->refs, 1);
        return t;
}

struct tenant *tenant_unref(struct tenant *t)
{
        /* The default tenant is static: its count never reaches zero. */
        if (t && atomic_fetch_sub(&t->refs, 1) == 1) {
                strv_free(t->profiles);
                explicit_bzero(t->key_hash, sizeof(t->key_hash));
                free(t);
        }
        return NULL;
}

struct tenant *tenant_default(void)
{
        static struct tenant def = { .refs = 1, .name = TENANT_DEFAULT };

        return &def;
}

int tenant_name_check(const char *name, struct airlock_error *err)
{
        size_t n = name ? strlen(name) : 0;

        if (n == 0 || n > TENANT_NAME_MAX)
                return airlock_error_set(err, -EINVAL, "a tenant name has 1 to %d characters",
                                         TENANT_NAME_MAX);
        if (!islower((unsigned char) name[0]) && !isdigit((unsigned char) name[0]))
                return airlock_error_set(err, -EINVAL,
                                         "tenant name '%.64s': it must start with a lowercase "
                                         "letter or a digit",
                                         name);
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) name[i];
                if (!islower(c) && !isdigit(c) && c != '_' && c != '-' && c != '.')
                        return airlock_error_set(err, -EINVAL,
                                                 "tenant name '%.64s': only lowercase letters, "
                                                 "digits, '_', '-' and '.' are allowed",
                                                 name);
        }
        if (strcmp(name, TENANT_DEFAULT) == 0)
                return airlock_error_set(err, -EINVAL,
                                         "the name 'default' is the tenant of the daemon's own "
                                         "token; choose another");
        return 0;
}

void tenant_key_hash(const char *key, size_t len, unsigned char ret_hash[TENANT_HASH_LEN])
{
        unsigned int n = TENANT_HASH_LEN;

        if (EVP_Digest(key, len, ret_hash, &n, EVP_sha256(), NULL) != 1 || n != TENANT_HASH_LEN)
                /* Out of memory inside libcrypto: a hash no key can have (all ones is as likely
                 * as any other value, but a real key never meets it by accident). */
                memset(ret_hash, 0xff, TENANT_HASH_LEN);
}

int tenant_key_new(char ret_key[TENANT_KEY_LEN + 1], unsigned char ret_hash[TENANT_HASH_LEN])
{
        size_t o = sizeof(TENANT_KEY_PREFIX) - 1;
        int r;

        memcpy(ret_key, TENANT_KEY_PREFIX, o);
        r = random_hex(ret_key + o, TENANT_KEY_BYTES);
        if (r < 0)
                return r;
        tenant_key_hash(ret_key, TENANT_KEY_LEN, ret_hash);
        return 0;
}

bool tenant_key_is_wellformed(const char *key, size_t len)
{
        size_t p = sizeof(TENANT_KEY_PREFIX) - 1;

        if (len != TENANT_KEY_LEN || memcmp(key, TENANT_KEY_PREFIX, p) != 0)
                return false;
        for (size_t i = p; i < len; i++)
                if (!isdigit((unsigned char) key[i]) && !(key[i] >= 'a' && key[i] <= 'f'))
                        return false;
        return true;
}

static bool profile_name_ok(const char *s, size_t n)
{
        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char) s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.')
                        return false;
        return true;
}

int tenant_profiles_parse(const char *s, char ***ret_profiles, struct airlock_error *err)
{
        _cleanup_(strv_freep) char **v = NULL;
        size_t n = 0;

        v = calloc(TENANT_PROFILES_MAX + 1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        for (const char *p = s;;) {
                const char *end = strchrnul(p, ',');
                if (!profile_name_ok(p, (size_t) (end - p)))
                        return airlock_error_set(err, -EINVAL,
                                                 "--profiles: '%.*s' is not a profile name "
                                                 "(letters, digits, '_', '-', '.'; names "
                                                 "separated by commas)",
                                                 (int) (end - p > 64 ? 64 : end - p), p);
                if (n >= TENANT_PROFILES_MAX)
                        return airlock_error_set(err, -EINVAL, "--profiles: at most %d profiles",
                                                 TENANT_PROFILES_MAX);
                v[n] = strndup(p, (size_t) (end - p));
                if (!v[n++])
                        return -ENOMEM;
                if (!*end)
                        break;
                p = end + 1;
        }
        *ret_profiles = TAKE_PTR(v);
        return 0;
}

int tenant_cpu_parse(const char *s, uint32_t *ret_millicpus)
{
        char *end;
        double v;

        if (!s || !*s || isspace((unsigned char) *s))
                return -EINVAL;
        errno = 0;
        v = strtod(s, &end);
        if (errno != 0 || *end != '\0' || !isfinite(v) || v < 0 || v > 1024)
                return -EINVAL;
        if (v > 0 && v < 0.01)
                return -EINVAL;
        *ret_millicpus = (uint32_t) llround(v * 1000);
        return 0;
}

/* --- the store --- */

struct tenant_db {
        sqlite3 *db;
};

static const char schema[] = "PRAGMA journal_mode=WAL;"
                             "CREATE TABLE IF NOT EXISTS tenants ("
                             "  name TEXT PRIMARY KEY,"
                             "  key_sha256 BLOB,"
                             "  max_sessions INTEGER NOT NULL DEFAULT 0,"
                             "  max_memory INTEGER NOT NULL DEFAULT 0,"
                             "  max_millicpus INTEGER NOT NULL DEFAULT 0,"
                             "  profiles TEXT,"
                             "  created_at INTEGER NOT NULL,"
                             "  key_changed_at INTEGER NOT NULL,"
                             "  revoked_at INTEGER"
                             ");";

static int dir_path(const char *state_dir, char *buf, size_t size)
{
        int n = snprintf(buf, size, "%s/%s", state_dir, TENANT_DIR);

        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : 0;
}

/* Makes dir 0700 when missing and checks that it is a directory of ours, closed to others:
 * whoever can write there could plant a tenants.db with keys of their own. */
static int dir_make(const char *dir, struct airlock_error *err)
{
        struct stat st;

        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return airlock_error_set(err, -errno, "cannot create '%s': %s", dir,
                                         strerror(errno));
        if (lstat(dir, &st) < 0)
                return airlock_error_set(err, -errno, "cannot stat '%s': %s", dir, strerror(errno));
        if (!S_ISDIR(st.st_mode))
                return airlock_error_set(err, -ENOTDIR, "'%s' is not a directory", dir);
        if (st.st_uid != geteuid() || (st.st_mode & 022))
                return airlock_error_set(err, -EPERM,
                                         "'%s' must be owned by uid %u and not writable by "
                                         "others (run `chmod 700 %s`)",
                                         dir, (unsigned) geteuid(), dir);
        return 0;
}

int tenant_db_open(const char *state_dir, bool create, struct tenant_db **ret_db,
                   struct airlock_error *err)
{
        char dir[4096], path[4200];
        struct tenant_db *db;
        char *msg = NULL;
        int r, rc;

        r = dir_path(state_dir, dir, sizeof(dir));
        if (r < 0)
                return airlock_error_set(err, r, "the state directory path is too long");
        (void) snprintf(path, sizeof(path), "%s/%s", dir, TENANT_DB_FILE);
        if (!create && access(path, F_OK) < 0)
                return airlock_error_set(err, -ENOENT, "no tenants in '%s' (no %s)", state_dir,
                                         path);
        if (create) {
                r = dir_make(state_dir, err);
                if (r >= 0)
                        r = dir_make(dir, err);
                if (r < 0)
                        return r;
        }
        db = calloc(1, sizeof(*db));
        if (!db)
                return -ENOMEM;
        /* Created 0600 whatever the umask: the hashes are not keys, but nobody else's business. */
        mode_t old = umask(077);
        rc = sqlite3_open_v2(path, &db->db,
                             SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) |
                                     SQLITE_OPEN_NOMUTEX,
                             NULL);
        (void) umask(old);
        if (rc != SQLITE_OK) {
                r = airlock_error_set(err, -EIO, "cannot open '%s': %s", path,
                                      db->db ? sqlite3_errmsg(db->db) : sqlite3_errstr(rc));
                tenant_db_close(db);
                return r;
        }
        (void) sqlite3_busy_timeout(db->db, 5000);
        if (sqlite3_exec(db->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
                r = airlock_error_set(err, -EIO, "cannot use '%s': %s", path,
                                      msg ? msg : "unknown error");
                sqlite3_free(msg);
                tenant_db_close(db);
                return r;
        }
        *ret_db = db;
        return 0;
}

struct tenant_db *tenant_db_close(struct tenant_db *db)
{
        if (db) {
                (void) sqlite3_close(db->db);
                free(db);
        }
        return NULL;
}

static char *profiles_join(char **v)
{
        size_t n = 1;
        char *s;

        if (!v || !v[0])
                return NULL;
        for (char **p = v; *p; p++)
                n += strlen(*p) + 1;
        s = calloc(1, n);
        for (char **p = v; s && *p; p++) {
                if (p != v)
                        strcat(s, ",");
                strcat(s, *p);
        }
        return s;
}

/* Runs one statement binding the values of types ("s" text, "i" int64, "b" hash blob, "n"
 * null); returns the rows it changed, or -EIO with err set. */
static int db_run(struct tenant_db *db, struct airlock_error *err, const char *sql,
                  const char *types, ...)
{
        sqlite3_stmt *stmt = NULL;
        va_list ap;
        int rc, i = 1;

        if (sqlite3_prepare_v2(db->db, sql, -1, &stmt, NULL) != SQLITE_OK)
                return airlock_error_set(err, -EIO, "tenants.db: %s", sqlite3_errmsg(db->db));
        va_start(ap, types);
        for (const char *t = types; *t; t++, i++) {
                if (*t == 's') {
                        const char *v = va_arg(ap, const char *);
                        (void) (v ? sqlite3_bind_text(stmt, i, v, -1, SQLITE_TRANSIENT)
                                  : sqlite3_bind_null(stmt, i));
                } else if (*t == 'i') {
                        (void) sqlite3_bind_int64(stmt, i, va_arg(ap, long long));
                } else if (*t == 'b') {
                        (void) sqlite3_bind_blob(stmt, i, va_arg(ap, const unsigned char *),
                                                 TENANT_HASH_LEN, SQLITE_TRANSIENT);
                }
        }
        va_end(ap);
        rc = sqlite3_step(stmt);
        sqlite3_finalize(stmt);
        if (rc == SQLITE_CONSTRAINT)
                return -EEXIST;
        if (rc != SQLITE_DONE)
                return airlock_error_set(err, -EIO, "tenants.db: %s", sqlite3_errmsg(db->db));
        return sqlite3_changes(db->db);
}

int tenant_db_add(struct tenant_db *db, const char *name, const struct tenant_spec *spec,
                  char ret_key[TENANT_KEY_LEN + 1], struct airlock_error *err)
{
        _cleanup_free_ char *profiles = NULL;
        unsigned char hash[TENANT_HASH_LEN];
        char key[TENANT_KEY_LEN + 1];
        long long now = (long long) time(NULL);
        int r;

        r = tenant_name_check(name, err);
        if (r < 0)
                return r;
        profiles = spec->has_profiles ? profiles_join(spec->profiles) : NULL;
        r = tenant_key_new(key, hash);
        if (r < 0)
                return airlock_error_set(err, r, "getrandom: %s", strerror(-r));
        r = db_run(db, err,
                   "INSERT INTO tenants (name, key_sha256, max_sessions, max_memory, "
                   "max_millicpus, profiles, created_at, key_changed_at) VALUES "
                   "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                   "sbiiisi", name, hash, (long long) spec->max_sessions,
                   (long long) spec->max_memory, (long long) spec->max_millicpus, profiles, now);
        if (r == -EEXIST)
                r = airlock_error_set(err, -EEXIST,
                                      "tenant '%s' exists already (`airlock tenants rotate %s` "
                                      "gives it a new key)",
                                      name, name);
        if (r >= 0)
                memcpy(ret_key, key, sizeof(key));
        explicit_bzero(key, sizeof(key));
        return r < 0 ? r : 0;
}

static int not_found(struct airlock_error *err, const char *name)
{
        return airlock_error_set(
                err, -ENOENT, "no tenant named '%.64s' (`airlock tenants list` shows them)", name);
}

int tenant_db_set(struct tenant_db *db, const char *name, const struct tenant_spec *spec,
                  struct airlock_error *err)
{
        _cleanup_free_ char *profiles = profiles_join(spec->profiles);
        int r;

        /* One statement: a field not given keeps its value (the CASE on its has_ flag). */
        r = db_run(db, err,
                   "UPDATE tenants SET "
                   "max_sessions = CASE WHEN ?2 THEN ?3 ELSE max_sessions END, "
                   "max_memory = CASE WHEN ?4 THEN ?5 ELSE max_memory END, "
                   "max_millicpus = CASE WHEN ?6 THEN ?7 ELSE max_millicpus END, "
                   "profiles = CASE WHEN ?8 THEN ?9 ELSE profiles END "
                   "WHERE name = ?1",
                   "siiiiiiis", name, (long long) spec->has_max_sessions,
                   (long long) spec->max_sessions, (long long) spec->has_max_memory,
                   (long long) spec->max_memory, (long long) spec->has_max_cpu,
                   (long long) spec->max_millicpus, (long long) spec->has_profiles, profiles);
        if (r < 0)
                return r;
        return r == 0 ? not_found(err, name) : 0;
}

int tenant_db_revoke(struct tenant_db *db, const char *name, struct airlock_error *err)
{
        int r = db_run(db, err,
                       "UPDATE tenants SET key_sha256 = NULL, revoked_at = ?2, key_changed_at = ?2 "
                       "WHERE name = ?1",
                       "si", name, (long long) time(NULL));

        if (r < 0)
                return r;
        return r == 0 ? not_found(err, name) : 0;
}

int tenant_db_rotate(struct tenant_db *db, const char *name, char ret_key[TENANT_KEY_LEN + 1],
                     struct airlock_error *err)
{
        unsigned char hash[TENANT_HASH_LEN];
        char key[TENANT_KEY_LEN + 1];
        int r;

        r = tenant_key_new(key, hash);
        if (r < 0)
                return airlock_error_set(err, r, "getrandom: %s", strerror(-r));
        r = db_run(db, err,
                   "UPDATE tenants SET key_sha256 = ?2, revoked_at = NULL, key_changed_at = ?3 "
                   "WHERE name = ?1",
                   "sbi", name, hash, (long long) time(NULL));
        if (r == 0)
                r = not_found(err, name);
        if (r > 0)
                memcpy(ret_key, key, sizeof(key));
        explicit_bzero(key, sizeof(key));
        return r < 0 ? r : 0;
}

static json_t *profiles_json(const char *csv)
{
        json_t *a;
        char **v = NULL;

        if (!csv || !*csv)
                return json_null();
        if (tenant_profiles_parse(csv, &v, NULL) < 0)
                return json_null();
        a = json_array();
        for (char **p = v; a && *p; p++)
                (void) json_array_append_new(a, json_string(*p));
        strv_free(v);
        return a;
}

int tenant_db_list(struct tenant_db *db, const char *name, json_t **ret, struct airlock_error *err)
{
        sqlite3_stmt *stmt = NULL;
        json_t *arr = json_array();
        int rc;

        if (!arr)
                return -ENOMEM;
        if (sqlite3_prepare_v2(db->db,
                               "SELECT name, max_sessions, max_memory, max_millicpus, profiles, "
                               "created_at, key_changed_at, revoked_at FROM tenants "
                               "WHERE ?1 IS NULL OR name = ?1 ORDER BY name",
                               -1, &stmt, NULL) != SQLITE_OK) {
                json_decref(arr);
                return airlock_error_set(err, -EIO, "tenants.db: %s", sqlite3_errmsg(db->db));
        }
        (void) (name ? sqlite3_bind_text(stmt, 1, name, -1, SQLITE_TRANSIENT)
                     : sqlite3_bind_null(stmt, 1));
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
                long long mc = sqlite3_column_int64(stmt, 3);
                json_t *o =
                        json_pack("{s:s, s:I, s:I, s:o, s:o, s:I, s:I, s:b}", "name",
                                  (const char *) sqlite3_column_text(stmt, 0), "max_sessions",
                                  (json_int_t) sqlite3_column_int64(stmt, 1), "max_memory_bytes",
                                  (json_int_t) sqlite3_column_int64(stmt, 2), "max_cpu",
                                  json_real((double) mc / 1000.0), "profiles",
                                  profiles_json((const char *) sqlite3_column_text(stmt, 4)),
                                  "created_at", (json_int_t) sqlite3_column_int64(stmt, 5),
                                  "key_changed_at", (json_int_t) sqlite3_column_int64(stmt, 6),
                                  "revoked", sqlite3_column_type(stmt, 7) != SQLITE_NULL);
                if (!o || json_array_append_new(arr, o) < 0) {
                        sqlite3_finalize(stmt);
                        json_decref(arr);
                        return -ENOMEM;
                }
        }
        sqlite3_finalize(stmt);
        if (rc != SQLITE_DONE) {
                json_decref(arr);
                return airlock_error_set(err, -EIO, "tenants.db: %s", sqlite3_errmsg(db->db));
        }
        if (name && json_array_size(arr) == 0) {
                json_decref(arr);
                return not_found(err, name);
        }
        *ret = arr;
        return 0;
}

/* --- the daemon's registry --- */

struct tenant_registry {
        pthread_mutex_t lock;
        char *dir, *path;
        int inotify_fd; /* on dir; -EBADF when the watch is lost: then every resolve reloads */
        bool stale;     /* reload before the next resolve */
        struct tenant **tenants; /* those with a key (revoked ones are left out) */
        size_t n;
};

static void registry_clear(struct tenant_registry *reg)
{
        for (size_t i = 0; i < reg->n; i++)
                tenant_unref(reg->tenants[i]);
        free(reg->tenants);
        reg->tenants = NULL;
        reg->n = 0;
}

/* Reads every tenant with a key. On failure the old list stays, and the next resolve tries
 * again: a half-written file never opens the door wider than it was. Lock held. */
static int registry_load(struct tenant_registry *reg)
{
        sqlite3 *db = NULL;
        sqlite3_stmt *stmt = NULL;
        struct tenant **v = NULL;
        size_t n = 0, cap = 0;
        int rc, r = 0;

        if (access(reg->path, F_OK) < 0) {
                registry_clear(reg);
                reg->stale = false;
                return 0;
        }
        rc = sqlite3_open_v2(reg->path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
        if (rc == SQLITE_OK)
                (void) sqlite3_busy_timeout(db, 2000);
        if (rc != SQLITE_OK ||
            sqlite3_prepare_v2(db,
                               "SELECT name, key_sha256, max_sessions, max_memory, max_millicpus, "
                               "profiles FROM tenants WHERE key_sha256 IS NOT NULL",
                               -1, &stmt, NULL) != SQLITE_OK) {
                (void) sqlite3_close(db);
                return -EIO;
        }
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
                struct tenant *t;
                const char *profiles = (const char *) sqlite3_column_text(stmt, 5);

                if (sqlite3_column_bytes(stmt, 1) != TENANT_HASH_LEN)
                        continue;
                if (n == cap) {
                        struct tenant **nv = realloc(v, (cap ? cap * 2 : 8) * sizeof(*v));
                        if (!nv) {
                                r = -ENOMEM;
                                break;
                        }
                        v = nv;
                        cap = cap ? cap * 2 : 8;
                }
                t = calloc(1, sizeof(*t));
                if (!t) {
                        r = -ENOMEM;
                        break;
                }
                atomic_init(&t->refs, 1);
                (void) snprintf(t->name, sizeof(t->name), "%s",
                                (const char *) sqlite3_column_text(stmt, 0));
                memcpy(t->key_hash, sqlite3_column_blob(stmt, 1), TENANT_HASH_LEN);
                t->max_sessions = (unsigned) sqlite3_column_int64(stmt, 2);
                t->max_memory = (uint64_t) sqlite3_column_int64(stmt, 3);
                t->max_millicpus = (uint32_t) sqlite3_column_int64(stmt, 4);
                if (profiles && *profiles &&
                    tenant_profiles_parse(profiles, &t->profiles, NULL) < 0)
                        /* A list we cannot read allows nothing rather than everything. */
                        t->profiles = calloc(1, sizeof(char *));
                v[n++] = t;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = -EIO;
        sqlite3_finalize(stmt);
        (void) sqlite3_close(db);
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        tenant_unref(v[i]);
                free(v);
                return r;
        }
        registry_clear(reg);
        reg->tenants = v;
        reg->n = n;
        reg->stale = false;
        return 0;
}

int tenant_registry_new(const char *state_dir, struct tenant_registry **ret_reg,
                        struct airlock_error *err)
{
        struct tenant_registry *reg;
        char dir[4096];
        int r;

        r = dir_path(state_dir, dir, sizeof(dir));
        if (r < 0)
                return airlock_error_set(err, r, "the state directory path is too long");
        r = dir_make(dir, err);
        if (r < 0)
                return r;
        reg = calloc(1, sizeof(*reg));
        if (!reg)
                return -ENOMEM;
        pthread_mutex_init(&reg->lock, NULL);
        reg->inotify_fd = -EBADF;
        reg->dir = strdup(dir);
        if (!reg->dir || asprintf(&reg->path, "%s/%s", dir, TENANT_DB_FILE) < 0) {
                reg->path = NULL;
                tenant_registry_free(reg);
                return -ENOMEM;
        }
        reg->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (reg->inotify_fd < 0 ||
            inotify_add_watch(reg->inotify_fd, dir,
                              IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM |
                                      IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF) <
                    0) {
                r = -errno;
                tenant_registry_free(reg);
                return airlock_error_set(err, r, "cannot watch '%s' for tenant changes: %s", dir,
                                         strerror(-r));
        }
        r = registry_load(reg);
        if (r < 0) {
                tenant_registry_free(reg);
                return airlock_error_set(err, r, "cannot read the tenants in '%s/%s'", dir,
                                         TENANT_DB_FILE);
        }
        *ret_reg = reg;
        return 0;
}

struct tenant_registry *tenant_registry_free(struct tenant_registry *reg)
{
        if (!reg)
                return NULL;
        registry_clear(reg);
        if (reg->inotify_fd >= 0)
                (void) close(reg->inotify_fd);
        free(reg->dir);
        free(reg->path);
        pthread_mutex_destroy(&reg->lock);
        free(reg);
        return NULL;
}

/* Drains the inotify queue: whatever happened in the directory, the tenants are read again
 * (the events of one commit are a handful). Lock held. */
static void registry_poll(struct tenant_registry *reg)
{
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

        if (reg->inotify_fd < 0) {
                reg->stale = true;
                return;
        }
        for (;;) {
                ssize_t n = read(reg->inotify_fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                reg->stale = true;
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *) p;
                        /* The directory went away or moved: without a watch, every resolve
                         * reads the store (slow, never wrong). */
                        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
                                (void) close(reg->inotify_fd);
                                reg->inotify_fd = -EBADF;
                                return;
                        }
                        p += sizeof(*ev) + ev->len;
                }
        }
}

int tenant_registry_resolve(struct tenant_registry *reg, const char *key, size_t len,
                            struct tenant **ret_tenant)
{
        unsigned char hash[TENANT_HASH_LEN];
        struct tenant *found = NULL;

        if (!reg || !tenant_key_is_wellformed(key, len))
                return -ENOENT;
        tenant_key_hash(key, len, hash);
        pthread_mutex_lock(&reg->lock);
        registry_poll(reg);
        if (reg->stale)
                (void) registry_load(reg);
        /* Every stored hash is compared in full, whichever matches. */
        for (size_t i = 0; i < reg->n; i++) {
                volatile unsigned char diff = 0;
                for (size_t k = 0; k < TENANT_HASH_LEN; k++)
                        diff |= reg->tenants[i]->key_hash[k] ^ hash[k];
                if (diff == 0 && !found)
                        found = reg->tenants[i];
        }
        if (found)
                *ret_tenant = tenant_ref(found);
        pthread_mutex_unlock(&reg->lock);
        return found ? 0 : -ENOENT;
}

/* --- the scope --- */

struct scope {
        const struct tenant *tenant;
        struct tenant_refusal refusal;
};

static _Thread_local struct scope scope;

void tenant_scope_set(const struct tenant *t)
{
        scope.tenant = t;
        scope.refusal = (struct tenant_refusal){ .quota = NULL };
}

const struct tenant *tenant_scope(void)
{
        return scope.tenant;
}

const char *tenant_scope_owner(void)
{
        return scope.tenant ? scope.tenant->name : TENANT_DEFAULT;
}

const char *tenant_scope_filter(void)
{
        return scope.tenant ? scope.tenant->name : NULL;
}

bool tenant_scope_sees(const char *owner)
{
        if (!scope.tenant)
                return true;
        if (!owner || !*owner)
                owner = TENANT_DEFAULT;
        return strcmp(scope.tenant->name, owner) == 0;
}

const struct tenant_refusal *tenant_scope_refusal(void)
{
        return scope.refusal.quota ? &scope.refusal : NULL;
}

static int refuse(const struct tenant *t, const char *quota, const char *limit, const char *what,
                  struct airlock_error *err)
{
        scope.refusal.quota = quota;
        (void) snprintf(scope.refusal.limit, sizeof(scope.refusal.limit), "%s", limit);
        return airlock_error_set(err, -EXFULL, "tenant '%s' has reached its quota of %s (%s)",
                                 t->name, what, quota);
}

int tenant_quota_check(const struct tenant *t, const struct tenant_usage *use,
                       const struct tenant_usage *add, struct airlock_error *err)
{
        char limit[32], what[96];

        if (!t)
                return 0;
        if (t->max_sessions && use->sessions + add->sessions > t->max_sessions) {
                (void) snprintf(limit, sizeof(limit), "%u", t->max_sessions);
                (void) snprintf(what, sizeof(what), "%u live sessions", t->max_sessions);
                return refuse(t, "max_sessions", limit, what, err);
        }
        if (t->max_memory && use->memory + add->memory > t->max_memory) {
                (void) snprintf(limit, sizeof(limit), "%llu", (unsigned long long) t->max_memory);
                (void) snprintf(what, sizeof(what),
                                "%llu bytes of memory for its live sessions (%llu in use, %llu "
                                "more asked)",
                                (unsigned long long) t->max_memory,
                                (unsigned long long) use->memory, (unsigned long long) add->memory);
                return refuse(t, "max_memory", limit, what, err);
        }
        if (t->max_millicpus && use->millicpus + add->millicpus > t->max_millicpus) {
                (void) snprintf(limit, sizeof(limit), "%g", t->max_millicpus / 1000.0);
                (void) snprintf(what, sizeof(what),
                                "%g CPUs for its live sessions (%g in use, %g more asked)",
                                t->max_millicpus / 1000.0, (double) use->millicpus / 1000.0,
                                (double) add->millicpus / 1000.0);
                return refuse(t, "max_cpu", limit, what, err);
        }
        return 0;
}

int tenant_profile_check(const struct tenant *t, const char *profile, struct airlock_error *err)
{
        char allowed[512] = "";
        size_t o = 0;

        if (!t || !t->profiles)
                return 0;
        for (char **p = t->profiles; *p; p++) {
                if (strcmp(*p, profile) == 0)
                        return 0;
                int n = snprintf(allowed + o, sizeof(allowed) - o, "%s%s", o ? ", " : "", *p);
                if (n < 0 || (size_t) n >= sizeof(allowed) - o)
                        break;
                o += (size_t) n;
        }
        return airlock_error_set(err, -EACCES,
                                 "profile: tenant '%s' may not use profile '%.64s'; its "
                                 "profiles are: %s",
                                 t->name, profile, o ? allowed : "(none)");
}

static int count_row(void *userdata, int n, char **values, char **names)
{
        (void) n, (void) values, (void) names;
        (*(int *) userdata)++;
        return 0;
}

int tenant_owner_column_add(sqlite3 *db, const char *table, char **ret_msg)
{
        char *probe = sqlite3_mprintf("SELECT 1 FROM pragma_table_info('%q') WHERE name = 'owner'",
                                      table);
        char *alter =
                sqlite3_mprintf("ALTER TABLE \"%w\" ADD COLUMN owner TEXT NOT NULL DEFAULT '%q'",
                                table, TENANT_DEFAULT);
        int n = 0, rc = SQLITE_NOMEM;

        if (probe && alter) {
                rc = sqlite3_exec(db, probe, count_row, &n, ret_msg);
                if (rc == SQLITE_OK && n == 0)
                        rc = sqlite3_exec(db, alter, NULL, NULL, ret_msg);
        }
        sqlite3_free(probe);
        sqlite3_free(alter);
        return rc;
}
