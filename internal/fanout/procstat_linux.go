package fanout

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// cpuSeconds is the process's user + system time. getrusage has
// microsecond resolution, where /proc/self/stat counts 10 ms ticks.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// rssBytes reads VmRSS from /proc/self/status (0 if unavailable).
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return parseVmRSS(b)
}

// parseVmRSS finds "VmRSS:   1234 kB" in the contents of /proc/<pid>/status.
func parseVmRSS(status []byte) uint64 {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return 0
		}
		kb, err := strconv.ParseUint(string(fields[0]), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// RaiseFileLimit raises the soft limit on open files to at least n (up to
// the hard limit), for benchmarks that hold many connections. It returns
// the soft limit in force.
func RaiseFileLimit(n uint64) (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if rl.Cur >= n {
		return rl.Cur, nil
	}
	rl.Cur = min(n, rl.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return rl.Cur, nil
}

// machineBusySeconds is the CPU time all processes of the machine have
// used since boot (the busy columns of the "cpu" line of /proc/stat), or 0
// if unavailable.
func machineBusySeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	return parseProcStatBusy(b, 100) // USER_HZ is 100 on every Linux ABI Go supports
}

// parseProcStatBusy sums user, nice, system, irq, softirq and steal of the
// aggregate cpu line, in ticks of hz per second.
func parseProcStatBusy(stat []byte, hz float64) float64 {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	fields := bytes.Fields(line)
	if len(fields) < 9 || string(fields[0]) != "cpu" {
		return 0
	}
	var busy uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system [idle iowait] irq softirq steal
		v, err := strconv.ParseUint(string(fields[i]), 10, 64)
		if err != nil {
			return 0
		}
		busy += v
	}
	return float64(busy) / hz
}
