#include <sqlite3.h>

/* sqlite3_db_config is variadic, which Swift cannot call: the one setting DeltaSQLite uses.
   The query planner stability guarantee: plans never depend on the values bound to a statement,
   so a statement is not prepared again when they change (a partial index otherwise makes every
   statement whose parameters it might imply be re-prepared at each new binding). */
static inline int deltasnap_sqlite_fix_plans(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_QPSG, 1, (int *)0);
}

/* The first region of the write-ahead log's shared-memory index (https://www.sqlite.org/walformat.html,
   "The WAL-Index Format"), as this connection's VFS maps it: the region stays mapped, at the same
   address, until the connection closes. Returns SQLITE_OK and sets *region, or an error (no WAL,
   a VFS without shared memory, or the region not yet created). */
static inline int deltasnap_sqlite_wal_index(sqlite3 *db, const volatile void **region) {
    sqlite3_file *file = 0;
    int status = sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file);
    if (status != SQLITE_OK) return status;
    if (file == 0 || file->pMethods == 0 || file->pMethods->iVersion < 2 || file->pMethods->xShmMap == 0) return SQLITE_NOTFOUND;
    volatile void *mapped = 0;
    status = file->pMethods->xShmMap(file, 0, 32768, 0, &mapped);
    if (status != SQLITE_OK) return status;
    if (mapped == 0) return SQLITE_NOTFOUND;
    *region = mapped;
    return SQLITE_OK;
}

/* The WAL-index header from `region`, read without a lock as SQLite's own readers first read it
   (walIndexTryHdr): its first copy, a barrier, its second copy, then its checksum. A writer
   writes the second copy first, then the first; so equal copies with a right checksum are one
   whole header. Every commit changes it: its change counter (iChange) moves on, its frame count
   grows, or its salts change when the log restarts. A header rebuilt from the log (after every
   connection closed, or after a crash) starts its change counter at 0, and the same log rebuilds
   the same header: one with a counter of 0 is not returned, as two rebuilds may be equal with
   commits between them. Returns 1 and the 48 bytes in `out`, else 0 (a writer is between the two
   copies, or the header is a rebuilt one: ask SQLite). */
static inline int deltasnap_sqlite_wal_index_header(const volatile void *region, unsigned long long out[6]) {
    const unsigned int *words = (const unsigned int *)region;
    unsigned int first[12], second[12];
    for (int i = 0; i < 12; i++) first[i] = __atomic_load_n(&words[i], __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (int i = 0; i < 12; i++) second[i] = __atomic_load_n(&words[12 + i], __ATOMIC_RELAXED);
    for (int i = 0; i < 12; i++) if (first[i] != second[i]) return 0;
    unsigned char bytes[48];
    __builtin_memcpy(bytes, first, sizeof bytes);
    if (bytes[12] == 0) return 0; /* isInit */
    if (first[2] == 0) return 0;  /* iChange: a rebuilt header */
    unsigned int s1 = 0, s2 = 0;  /* walChecksumBytes over the first 40 bytes, native order */
    for (int i = 0; i < 10; i += 2) {
        s1 += first[i] + s2;
        s2 += first[i + 1] + s1;
    }
    if (s1 != first[10] || s2 != first[11]) return 0;
    __builtin_memcpy(out, first, sizeof bytes);
    return 1;
}
