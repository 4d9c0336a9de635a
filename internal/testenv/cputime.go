package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// CPUTime returns the CPU time, user and system, the running process has used so far.
func (p *Process) CPUTime() (time.Duration, error) {
	_, cpu, _, err := procStat(p.cmd.Process.Pid)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.Name, err)
	}
	return cpu, nil
}

// ControlPlaneCPU returns the CPU time used so far by this process's kube-apiserver and
// etcd children (envtest's control plane): what the API requests of a test cost the
// server side.
func ControlPlaneCPU() (time.Duration, error) {
	pids, err := controlPlanePIDs()
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, pid := range pids {
		_, cpu, _, err := procStat(pid)
		if err != nil {
			return 0, err
		}
		total += cpu
	}
	return total, nil
}

// ControlPlaneRSS returns the memory this process's kube-apiserver and etcd children
// hold resident now (VmRSS), in bytes: what the objects of a test cost the server side.
func ControlPlaneRSS() (int64, error) {
	pids, err := controlPlanePIDs()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, pid := range pids {
		rss, err := statusField(pid, "VmRSS")
		if err != nil {
			return 0, err
		}
		total += rss
	}
	return total, nil
}

// controlPlanePIDs lists this process's kube-apiserver and etcd children.
func controlPlanePIDs() ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, path := range stats {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		name, _, ppid, err := procStat(pid)
		if err != nil || ppid != os.Getpid() || name != "kube-apiserver" && name != "etcd" {
			continue // gone since the listing, or not ours
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("no kube-apiserver or etcd child of process %d", os.Getpid())
	}
	return pids, nil
}

// procStat reads a process's command name, CPU time (utime + stime) and parent from
// /proc/<pid>/stat.
func procStat(pid int) (name string, cpu time.Duration, ppid int, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, err
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses, the last ")" ends it.
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[end+1:])
	// After the name: state(0) ppid(1) ... utime(11) stime(12).
	if len(fields) < 13 {
		return "", 0, 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(fields))
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return "", 0, 0, fmt.Errorf("/proc/%d/stat: ppid: %w", pid, err)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return "", 0, 0, fmt.Errorf("/proc/%d/stat: cpu time: %w", pid, err)
		}
		ticks += n
	}
	return s[open+1 : end], time.Duration(ticks) * time.Second / clockTicks, ppid, nil
}
