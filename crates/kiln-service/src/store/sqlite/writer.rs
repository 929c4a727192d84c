//! The SQLite store's writer thread: group commits (see the [store's docs](super)), and what
//! a failed write is to a client ([`sqlite_err`]).

use super::exec;
use crate::store::{StoreError, StoreFault};
use rusqlite::Connection;
use std::sync::mpsc;

/// Writes committed together at most.
pub const GROUP: usize = 256;

/// Answers one write's caller, given the group's begin or commit error if there was one.
pub(super) type Reply = Box<dyn FnOnce(Option<&StoreError>) + Send>;

/// One write: run on the group's transaction, it gives its own failure (if it failed) and
/// the caller's [`Reply`].
pub(super) type WriteOp = Box<dyn FnOnce(&Connection) -> (Option<StoreError>, Reply) + Send>;

/// An SQLite error as a store error. A write the disk refused is [`StoreFault::Full`]:
/// `SQLITE_FULL` (no space), and the write-side I/O errors, which is what SQLite reports
/// when `write(2)` fails with anything but ENOSPC (EFBIG past a file size limit, EDQUOT);
/// a busy or locked database is [`StoreFault::Unavailable`]. Both are 503s to retry
/// (error.rs), and the supervisor keeps an outcome it could not store until the write
/// goes through (supervisor/outcome.rs).
pub(super) fn sqlite_err(e: &rusqlite::Error) -> StoreError {
    use rusqlite::ffi;
    let fault = match e {
        rusqlite::Error::SqliteFailure(f, _) => match f.code {
            rusqlite::ErrorCode::DiskFull => StoreFault::Full,
            rusqlite::ErrorCode::SystemIoFailure
                if [
                    ffi::SQLITE_IOERR_WRITE,
                    ffi::SQLITE_IOERR_FSYNC,
                    ffi::SQLITE_IOERR_TRUNCATE,
                ]
                .contains(&f.extended_code) =>
            {
                StoreFault::Full
            }
            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked => {
                StoreFault::Unavailable
            }
            _ => StoreFault::Failed,
        },
        _ => StoreFault::Failed,
    };
    let msg = match fault {
        StoreFault::Full => format!("{e} (the disk refused a write: full, or past a file size limit)"),
        _ => e.to_string(),
    };
    StoreError::with_fault(fault, msg)
}

/// The writer thread: until the channel closes, take the waiting writes (up to [`GROUP`]),
/// run each in a savepoint of one transaction, commit, then answer every caller.
pub(super) fn writer_loop(mut c: Connection, rx: mpsc::Receiver<WriteOp>) {
    while let Ok(first) = rx.recv() {
        let mut ops = vec![first];
        while ops.len() < GROUP {
            match rx.try_recv() {
                Ok(op) => ops.push(op),
                Err(_) => break,
            }
        }
        group(&mut c, ops);
    }
    let _ = c.pragma_update(None, "wal_checkpoint", "TRUNCATE");
    drop(c.close());
}

/// One group commit.
fn group(c: &mut Connection, ops: Vec<WriteOp>) {
    let tx = match c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate) {
        Ok(t) => t,
        Err(e) => {
            let e = sqlite_err(&e);
            for op in ops {
                op_failed(op)(Some(&e));
            }
            return;
        }
    };
    let mut replies: Vec<Reply> = Vec::with_capacity(ops.len());
    let mut ops = ops.into_iter();
    while let Some(op) = ops.next() {
        // One savepoint name, its three statements prepared once: a group's ops nest
        // nothing, each is released (or rolled back) before the next begins.
        let _ = exec(&tx, "SAVEPOINT op", []);
        let (failure, reply) = op(&tx);
        replies.push(reply);
        if tx.is_autocommit() {
            // SQLite ended the whole transaction itself (it may on a full disk or an I/O
            // error in the middle of one): nothing of the group is stored. The ops left
            // must not run, or each would commit on its own behind the group's back.
            let e = failure.unwrap_or_else(|| {
                StoreError::with_fault(StoreFault::Unavailable, "the transaction was rolled back")
            });
            for r in replies {
                r(Some(&e));
            }
            for op in ops {
                op_failed(op)(Some(&e));
            }
            return;
        }
        // A failed op rolls back its own savepoint only (its reply carries the error).
        if failure.is_some() {
            let _ = exec(&tx, "ROLLBACK TO op", []);
        }
        let _ = exec(&tx, "RELEASE op", []);
    }
    let commit = tx.commit().err().map(|e| sqlite_err(&e));
    for r in replies {
        r(commit.as_ref());
    }
}

/// The reply of an op that cannot run: the op runs against an in-memory database without
/// the schema, so nothing reaches the store, and its reply (given the group's error) reports
/// that error.
fn op_failed(op: WriteOp) -> Reply {
    match Connection::open_in_memory() {
        Ok(mem) => op(&mem).1,
        Err(_) => Box::new(|_| {}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    type Answers = Arc<Mutex<Vec<(usize, Option<StoreFault>)>>>;

    /// An op running `sql`; its reply records (i, the error's fault if any).
    fn op(i: usize, sql: &'static str, answers: &Answers) -> WriteOp {
        let answers = answers.clone();
        Box::new(move |c| {
            let r = c.execute_batch(sql);
            let failure = r.as_ref().err().map(sqlite_err);
            let reply: Reply = Box::new(move |group_err| {
                let fault = group_err
                    .map(StoreError::fault)
                    .or(failure.as_ref().map(StoreError::fault));
                answers.lock().unwrap().push((i, fault));
            });
            (r.err().map(|e| sqlite_err(&e)), reply)
        })
    }

    fn db() -> (tempfile::TempDir, Connection) {
        let d = tempfile::tempdir().unwrap();
        let c = Connection::open(d.path().join("t.sqlite3")).unwrap();
        c.execute_batch("CREATE TABLE t(x INTEGER PRIMARY KEY)").unwrap();
        (d, c)
    }

    fn rows(c: &Connection) -> Vec<i64> {
        let mut st = c.prepare("SELECT x FROM t ORDER BY x").unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn a_failed_op_rolls_back_alone_and_the_rest_commit() {
        let (_d, mut c) = db();
        let answers = Answers::default();
        let ops = vec![
            op(0, "INSERT INTO t VALUES (1)", &answers),
            op(1, "INSERT INTO t VALUES (1)", &answers),
            op(2, "INSERT INTO t VALUES (2)", &answers),
        ];
        group(&mut c, ops);
        assert_eq!(rows(&c), [1, 2]);
        let a = answers.lock().unwrap().clone();
        assert_eq!(a, [(0, None), (1, Some(StoreFault::Failed)), (2, None)]);
    }

    #[test]
    fn a_transaction_ended_by_sqlite_stores_nothing_of_the_group() {
        // An op that ends the transaction stands for SQLite rolling it back on an I/O
        // error: the ops before it are not stored, those after it never run on their own.
        let (_d, mut c) = db();
        let answers = Answers::default();
        let ops = vec![
            op(0, "INSERT INTO t VALUES (1)", &answers),
            op(1, "ROLLBACK", &answers),
            op(2, "INSERT INTO t VALUES (2)", &answers),
        ];
        group(&mut c, ops);
        assert_eq!(rows(&c), Vec::<i64>::new(), "nothing of the group stored");
        let a = answers.lock().unwrap().clone();
        assert_eq!(a.len(), 3, "every op answered: {a:?}");
        assert!(
            a.iter().all(|(_, f)| f.is_some()),
            "every op answered with an error: {a:?}"
        );
        // the store still works afterwards
        group(&mut c, vec![op(3, "INSERT INTO t VALUES (3)", &answers)]);
        assert_eq!(rows(&c), [3]);
    }

    #[test]
    fn a_full_database_is_a_full_store_fault() {
        // max_page_count: SQLite's own limit, refused as SQLITE_FULL like a full disk
        let (_d, mut c) = db();
        c.execute_batch("CREATE TABLE big(b BLOB)").unwrap();
        let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
        c.pragma_update(None, "max_page_count", pages + 2).unwrap();
        let e = (0..100)
            .find_map(|_| c.execute("INSERT INTO big VALUES (zeroblob(8192))", []).err())
            .expect("the page limit is reached");
        let e = sqlite_err(&e);
        assert_eq!(e.fault(), StoreFault::Full, "{e}");
        assert!(e.is_transient());
        assert!(e.message().contains("the disk refused a write"), "{e}");
        // and through a group commit: the op's own failure
        let answers = Answers::default();
        group(
            &mut c,
            vec![op(0, "INSERT INTO big VALUES (zeroblob(65536))", &answers)],
        );
        assert_eq!(answers.lock().unwrap()[0], (0, Some(StoreFault::Full)));
        let other = sqlite_err(&c.execute("INSERT INTO nosuch VALUES (1)", []).unwrap_err());
        assert_eq!(other.fault(), StoreFault::Failed, "{other}");
        assert!(!other.is_transient());
    }
}
