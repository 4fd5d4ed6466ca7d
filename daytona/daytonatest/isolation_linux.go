//go:build linux

package daytonatest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
)

// stageEnv marks a process the emulator started through its own
// executable: the init below turns it into the sandbox's namespace, then
// execs the real command. Without the variable nothing happens, so test
// binaries that merely import the package are unaffected.
const stageEnv = "DAYTONATEST_SANDBOX_STAGE"

// Linux constants the syscall package does not name.
const (
	capSysAdmin          = 21
	prCapAmbient         = 47
	prCapAmbientClearAll = 4
)

// stageSpec is what the stage needs to build the sandbox's view.
type stageSpec struct {
	Home   string `json:"home"`   // host dir bound over /home
	Tmp    string `json:"tmp"`    // host dir bound over /tmp
	Dir    string `json:"dir"`    // the command's work dir, a sandbox path
	SetUID bool   `json:"setuid"` // root method: drop to the sandbox user
	TTY    bool   `json:"tty"`    // stdin is the PTY: give it to the sandbox user
	Root   string `json:"root"`   // holds passwd and group, bound over /etc's
}

func init() {
	if spec, ok := os.LookupEnv(stageEnv); ok {
		runStage(spec)
	}
}

// runStage never returns: it execs the command or exits 126 with one line
// on stderr (which the command's output then shows).
func runStage(spec string) {
	// Capabilities are per thread: the thread that clears them must be
	// the one that execs.
	runtime.LockOSThread()
	err := enterSandbox(spec)
	if err == nil {
		argv := os.Args[1:]
		env := make([]string, 0, len(os.Environ()))
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, stageEnv+"=") {
				env = append(env, kv)
			}
		}
		err = fmt.Errorf("exec %s: %w", argv[0], syscall.Exec(argv[0], argv, env))
	}
	fmt.Fprintf(os.Stderr, "daytonatest: sandbox: %v\n", err)
	os.Exit(126)
}

// enterSandbox runs in the new mount namespace: it makes every mount
// private (nothing propagates back to the host), binds the sandbox's home
// and tmp over /home and /tmp, becomes the sandbox user and enters the
// work dir.
func enterSandbox(spec string) error {
	var sp stageSpec
	if err := json.Unmarshal([]byte(spec), &sp); err != nil {
		return fmt.Errorf("stage spec: %w", err)
	}
	if len(os.Args) < 2 {
		return errors.New("stage: no command")
	}
	if err := syscall.Mount("none", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// The sandbox's user database first: its sources lie under the
	// sandbox root, which the /home and /tmp binds may hide.
	for _, f := range []string{"passwd", "group"} {
		if err := syscall.Mount(filepath.Join(sp.Root, f), "/etc/"+f, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind the sandbox's /etc/%s: %w", f, err)
		}
	}
	// Both sources are opened before anything is mounted: either may lie
	// under /home or /tmp of the host.
	srcs := []string{sp.Home, sp.Tmp}
	fds := make([]int, len(srcs))
	for i, src := range srcs {
		fd, err := syscall.Open(src, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", src, err)
		}
		fds[i] = fd
	}
	for i, at := range []string{"/home", sandboxTmp} {
		if err := syscall.Mount(fmt.Sprintf("/proc/self/fd/%d", fds[i]), at, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s over %s: %w", srcs[i], at, err)
		}
		_ = syscall.Close(fds[i])
	}
	if sp.SetUID {
		if sp.TTY {
			_ = syscall.Fchown(0, sandboxUID, sandboxGID)
		}
		if err := syscall.Setgroups([]int{sandboxGID}); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setgid(sandboxGID); err != nil {
			return fmt.Errorf("setgid: %w", err)
		}
		if err := syscall.Setuid(sandboxUID); err != nil {
			return fmt.Errorf("setuid: %w", err)
		}
	}
	if err := syscall.Chdir(sp.Dir); err != nil {
		return fmt.Errorf("chdir %s: %w", sp.Dir, err)
	}
	if !sp.SetUID {
		// The user-namespace method gave the stage CAP_SYS_ADMIN as an
		// ambient capability to mount; the command must not keep it.
		if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0); errno != 0 {
			return fmt.Errorf("drop ambient capabilities: %w", errno)
		}
	}
	return nil
}

var stageExecutable = sync.OnceValues(os.Executable)

// stageCommand runs argv through the stage in a new mount namespace (and,
// for the user-namespace method, a new user namespace mapping uid and gid
// 1000 to ours).
func (sb *sandbox) stageCommand(argv []string, dir string, env []string, tty bool) (*osexec.Cmd, error) {
	if sb.view.method == methodRootNS {
		if tools, err := shellStageTools(); err == nil {
			return sb.shellStageCommand(tools, argv, dir, env, tty), nil
		}
	}
	exe, err := stageExecutable()
	if err != nil {
		return nil, fmt.Errorf("daytonatest: own executable: %w", err)
	}
	spec, err := json.Marshal(stageSpec{
		Home: filepath.Join(sb.root, "home"), Tmp: filepath.Join(sb.root, "tmp"),
		Dir: dir, SetUID: sb.view.method == methodRootNS, TTY: tty, Root: sb.root,
	})
	if err != nil {
		return nil, err
	}
	cmd := &osexec.Cmd{
		Path: exe,
		Args: append([]string{exe}, argv...),
		Env:  append(env[:len(env):len(env)], stageEnv+"="+string(spec)),
	}
	a := &syscall.SysProcAttr{Setpgid: !tty, Cloneflags: syscall.CLONE_NEWNS}
	if sb.view.method == methodUserNS {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: os.Getuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: sandboxGID, HostID: os.Getgid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
		a.AmbientCaps = []uintptr{capSysAdmin}
	}
	cmd.SysProcAttr = a
	return cmd, nil
}

// shellStage is the root method's stage without re-executing the
// emulator's own binary: a test binary built with the race detector takes
// from a tenth of a second to seconds to start on a loaded machine, and
// every sandbox process would pay it. Go's Unshareflags gives the shell a
// new mount namespace with every mount already private; the shell opens
// both sources before mounting (either may lie under /home or /tmp of the
// host), binds them, hands a PTY to the sandbox user and execs the command
// as that user through setpriv. Its failures exit 126 with the tool's
// message on stderr, as the Go stage's do.
const shellStage = `h=$1 t=$2 d=$3 tty=$4 mount=$5 setpriv=$6 pw=$7 gr=$8; shift 8
exec 8<"$h" 9<"$t" || exit 126
"$mount" --bind "$pw" /etc/passwd || exit 126
"$mount" --bind "$gr" /etc/group || exit 126
"$mount" --bind /proc/self/fd/8 /home || exit 126
"$mount" --bind /proc/self/fd/9 /tmp || exit 126
exec 8<&- 9<&-
if [ "$tty" = 1 ]; then chown 1000:1000 /proc/self/fd/0 || exit 126; fi
cd "$d" || exit 126
exec "$setpriv" --reuid=1000 --regid=1000 --groups=1000 -- "$@"`

// stageTools are the programs shellStage runs, looked up once.
type stageTools struct{ sh, mount, setpriv string }

var shellStageTools = sync.OnceValues(func() (stageTools, error) {
	var t stageTools
	for _, p := range []struct {
		name string
		to   *string
	}{{"sh", &t.sh}, {"mount", &t.mount}, {"setpriv", &t.setpriv}} {
		path, err := osexec.LookPath(p.name)
		if err != nil {
			return t, err
		}
		*p.to = path
	}
	return t, nil
})

func (sb *sandbox) shellStageCommand(t stageTools, argv []string, dir string, env []string, tty bool) *osexec.Cmd {
	tf := "0"
	if tty {
		tf = "1"
	}
	args := append([]string{t.sh, "-c", shellStage, "sandbox-stage",
		filepath.Join(sb.root, "home"), filepath.Join(sb.root, "tmp"), dir, tf, t.mount, t.setpriv,
		filepath.Join(sb.root, "passwd"), filepath.Join(sb.root, "group")}, argv...)
	return &osexec.Cmd{
		Path:        t.sh,
		Args:        args,
		Env:         env,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: !tty, Unshareflags: syscall.CLONE_NEWNS},
	}
}

// probeMethod runs one command through the method in a throwaway tree and
// checks it ran as the sandbox user with the bound /tmp.
func probeMethod(m method) error {
	name := map[method]string{methodRootNS: "mount namespace (root)", methodUserNS: "user namespace"}[m]
	if _, err := os.Stat("/home"); err != nil {
		return fmt.Errorf("%s: no /home to mount over: %w", name, err)
	}
	d, err := os.MkdirTemp("", "daytonatest-probe-")
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer os.RemoveAll(d)
	sb := &sandbox{}
	if err := sb.setupTree(m, d, "probe", "daytona"); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	cmd, err := sb.stageCommand([]string{bashBinary(), "-c", `[ "$(id -u):$(id -g)" = 1000:1000 ] && [ "$PWD" = /home/daytona ] && : > /tmp/ok`},
		"/home/daytona", []string{"PATH=" + hostPath()}, false)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s unavailable: %v %s", name, err, strings.TrimSpace(string(out)))
	}
	if _, err := os.Stat(filepath.Join(sb.root, "tmp", "ok")); err != nil {
		return fmt.Errorf("%s: /tmp is not the sandbox's: %w", name, err)
	}
	return nil
}
