package benchkit

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// userHZ is the unit of the tick counts in /proc (USER_HZ): 100 on every
// Linux ABI Go supports.
const userHZ = 100

// SelfCPUSeconds is this process's user + system time. getrusage has
// microsecond resolution, where /proc/self/stat counts 10 ms ticks.
func SelfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// ProcessCPUSeconds is the user + system time of process pid, from
// /proc/<pid>/stat (10 ms ticks), or 0 if unavailable.
func ProcessCPUSeconds(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	return parseProcPIDStatCPU(b, userHZ)
}

// parseProcPIDStatCPU sums utime and stime (fields 14 and 15) of the
// contents of /proc/<pid>/stat, in ticks of hz per second. The command
// name (field 2) is in parentheses and may hold spaces and parentheses
// itself, so the fields are counted from the last ')'.
func parseProcPIDStatCPU(stat []byte, hz float64) float64 {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	fields := bytes.Fields(stat[i+1:]) // fields[0] is field 3, the state
	if len(fields) < 13 {
		return 0
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil {
			return 0
		}
		ticks += v
	}
	return float64(ticks) / hz
}

// SelfRSS is this process's resident set size (VmRSS), or 0 if
// unavailable.
func SelfRSS() uint64 { return rssOf("/proc/self/status") }

// ProcessRSS is the resident set size (VmRSS) of process pid, or 0 if
// unavailable.
func ProcessRSS(pid int) uint64 { return rssOf("/proc/" + strconv.Itoa(pid) + "/status") }

func rssOf(path string) uint64 {
	b, err := os.ReadFile(path)
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

// MachineBusySeconds is the CPU time all processes of the machine have
// used since boot (the busy columns of the "cpu" line of /proc/stat), or 0
// if unavailable.
func MachineBusySeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	return parseProcStatBusy(b, userHZ)
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
