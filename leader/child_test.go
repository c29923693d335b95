package leader_test

// childMain runs a child process's role; false in the test process.
func childMain() bool { return false }
