package nodedaemon

// TestOnly holds deliberately broken daemon behaviour for the twin's
// negative controls. Production never sets it; it exists so that each
// invariant can be shown to catch the bug it guards against.
type TestOnly struct {
	// ForgetLastReboot makes the daemon disregard the reboot record
	// (status.daemon.lastReboot) that it finds in its BootcNode, as if a
	// daemon process did not know what an earlier one asked for. A host
	// whose new image failed to boot and came back on the old one is then
	// staged and rebooted into the same image again: the double reboot
	// that the record exists to prevent. The record this process reports
	// itself is still remembered (Daemon.reported), so only a new process,
	// such as the one that starts after the reboot, forgets.
	ForgetLastReboot bool
}
