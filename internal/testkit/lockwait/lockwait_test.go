package lockwait

import "testing"

// waitsIn finds the lock a transaction waits for in InnoDB's status (as
// MariaDB 10.11 prints it), in the session's database only, and not the
// locks transactions hold.
func TestWaitsIn(t *testing.T) {
	const status = `------------
TRANSACTIONS
------------
Trx id counter 32066
LIST OF TRANSACTIONS FOR EACH SESSION:
---TRANSACTION 32007, ACTIVE 1 sec starting index read
mysql tables in use 1, locked 1
LOCK WAIT 2 lock struct(s), heap size 1128, 1 row lock(s)
MariaDB thread id 2488, OS thread handle 140374027286208, query id 64599 localhost root Updating
update lw set v=v+1 where id=1
------- TRX HAS BEEN WAITING 729635 us FOR THIS LOCK TO BE GRANTED:
RECORD LOCKS space id 524 page no 3 n bits 320 index PRIMARY of table ` + "`cl_abc`.`lw`" + ` trx id 32007 lock_mode X locks rec but not gap waiting
Record lock, heap no 2 PHYSICAL RECORD: n_fields 4; compact format; info bits 0
------------------
---TRANSACTION 31960, ACTIVE 1 sec
2 lock struct(s), heap size 1128, 1 row lock(s), undo log entries 1
RECORD LOCKS space id 524 page no 3 n bits 320 index PRIMARY of table ` + "`cl_held`.`lw`" + ` trx id 31960 lock_mode X locks rec but not gap
TABLE LOCK table ` + "`cl_tab`.`lw`" + ` trx id 31961 lock mode IX waiting
--------
FILE I/O
`
	for schema, want := range map[string]bool{
		"cl_abc":  true,  // a record lock waited for
		"cl_tab":  true,  // a table lock waited for
		"cl_held": false, // a lock held, printed with innodb_status_output_locks
		"cl_ab":   false, // another database whose name is a prefix
		"test":    false,
	} {
		if got := waitsIn(status, schema); got != want {
			t.Errorf("waitsIn(%q) = %v, want %v", schema, got, want)
		}
	}
}
