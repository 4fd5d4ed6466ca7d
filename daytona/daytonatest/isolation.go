package daytonatest

import (
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Isolation says how sandbox processes are separated from the host
// (docs/emulator.md#sandbox-layout).
type Isolation string

const (
	// IsolationAuto (the default) uses a mount namespace when the process
	// may create one (root: a mount namespace; otherwise an unprivileged
	// user namespace), else falls back to the host layout.
	IsolationAuto Isolation = "auto"
	// IsolationOff forces the host layout: commands run as the host user
	// in the sandbox's host directory and see the host's /tmp.
	IsolationOff Isolation = "off"
	// IsolationUserNS forces the user-namespace method even as root (so
	// tests cover it); it falls back like auto when unavailable.
	IsolationUserNS Isolation = "userns"
)

// IsolationEnv overrides the isolation of every Server that was given
// none or IsolationAuto (values: auto, off, userns), so a whole `go test`
// run or a daytona-sim can be forced onto the host layout.
const IsolationEnv = "DAYTONATEST_ISOLATION"

// Sandbox user and layout inside the namespace, as on Daytona.
const (
	sandboxUID = 1000
	sandboxGID = 1000
	sandboxTmp = "/tmp"
)

// WithIsolation sets how sandbox processes are isolated (default
// IsolationAuto; the IsolationEnv variable overrides auto).
func WithIsolation(i Isolation) Option { return func(c *config) { c.isolation = i } }

// method is how the sandboxes of one server run their processes.
type method int

const (
	methodHost   method = iota // no namespace: the host layout
	methodRootNS               // root: a mount namespace, then setuid 1000
	methodUserNS               // unprivileged: a user + mount namespace, uid 1000 mapped to ours
)

// isolationFor decides the method for a server and the reason when it is
// the host layout.
func isolationFor(want Isolation) (method, string) {
	if env := strings.TrimSpace(os.Getenv(IsolationEnv)); env != "" && (want == "" || want == IsolationAuto) {
		want = Isolation(env)
	}
	switch want {
	case IsolationOff:
		return methodHost, "isolation turned off (" + IsolationEnv + "=off or WithIsolation)"
	case "", IsolationAuto, IsolationUserNS:
	default:
		return methodHost, fmt.Sprintf("unknown isolation %q (want auto, off or userns)", want)
	}
	var errs []string
	if want != IsolationUserNS && os.Geteuid() == 0 {
		err := probe(methodRootNS)
		if err == nil {
			return methodRootNS, ""
		}
		errs = append(errs, err.Error())
	}
	err := probe(methodUserNS)
	if err == nil {
		return methodUserNS, ""
	}
	return methodHost, strings.Join(append(errs, err.Error()), "; ")
}

// probeResults caches one probe per method for the life of the process.
var probeResults sync.Map // method -> func() error (sync.OnceValue)

func probe(m method) error {
	f, _ := probeResults.LoadOrStore(m, sync.OnceValue(func() error { return probeMethod(m) }))
	return f.(func() error)()
}

// fallbackNote prints the one stderr line that says sandboxes use the
// host layout, once per process however many servers start.
type fallbackNote struct {
	once sync.Once
	w    io.Writer
}

var (
	noteMu sync.Mutex
	note   = &fallbackNote{w: os.Stderr}
)

func reportFallback(reason string) {
	noteMu.Lock()
	n := note
	noteMu.Unlock()
	n.once.Do(func() {
		fmt.Fprintf(n.w, "daytonatest: sandboxes use the host layout (no /home/daytona, shared /tmp, host user): %s\n", reason)
	})
}

// mountPoint maps a sandbox path prefix onto a host directory.
type mountPoint struct{ at, host string }

// pathView is how a sandbox's paths map to host paths: the namespace's
// bind mounts, or the sandbox tree itself on the host layout. Paths
// outside every mount point are outside the sandbox.
type pathView struct {
	mounts []mountPoint
	method method
}

// hostOf maps a clean absolute sandbox path to a host path.
func (v *pathView) hostOf(p string) (string, bool) {
	for _, m := range v.mounts {
		if within(m.at, p) {
			return m.host + p[len(m.at):], true
		}
	}
	return "", false
}

// aboveMount reports whether p is a proper ancestor of a mount point
// ("/" or, on the host layout, the directories above the tree): it can be
// walked through but not read.
func (v *pathView) aboveMount(p string) bool {
	for _, m := range v.mounts {
		if p == "/" || strings.HasPrefix(m.at, p+"/") {
			return true
		}
	}
	return false
}

// isMountRoot reports whether host is the host side of a mount point
// (never deleted through the toolbox).
func (v *pathView) isMountRoot(host string) bool {
	for _, m := range v.mounts {
		if m.host == host {
			return true
		}
	}
	return false
}

// maxSymlinks bounds symlink hops in one resolve, as the kernel's ELOOP.
const maxSymlinks = 40

// resolve maps a toolbox path (absolute, or relative to the work dir) to a
// host path inside the sandbox tree. The path is walked as the sandbox's
// processes would see it (pathView): every existing component is
// resolved through symlinks, absolute targets meaning sandbox paths, and
// must stay inside the sandbox's mounts; with followFinal false the last
// component itself may be a symlink (delete, move, lstat).
func (sb *sandbox) resolve(p string, followFinal bool) (string, error) {
	if p == "" {
		p = "."
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(sb.home, p)
	}
	comps := splitPath(filepath.Clean(p))
	cur, hops := "/", 0
	for i := 0; i < len(comps); i++ {
		next := filepath.Join(cur, comps[i])
		host, ok := sb.view.hostOf(next)
		if !ok {
			if sb.view.aboveMount(next) {
				cur = next
				continue
			}
			return "", errEscape
		}
		fi, err := os.Lstat(host)
		if err != nil {
			// Missing: the rest is taken literally.
			host, ok = sb.view.hostOf(filepath.Join(append([]string{next}, comps[i+1:]...)...))
			if !ok {
				return "", errEscape
			}
			return host, nil
		}
		if fi.Mode()&os.ModeSymlink == 0 || (i == len(comps)-1 && !followFinal) {
			cur = next
			continue
		}
		if hops++; hops > maxSymlinks {
			return "", &os.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(host)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(cur, target)
		}
		comps = splitPath(filepath.Clean(filepath.Join(append([]string{target}, comps[i+1:]...)...)))
		cur, i = "/", -1
	}
	host, ok := sb.view.hostOf(cur)
	if !ok {
		return "", errEscape
	}
	return host, nil
}

// splitPath splits a clean absolute path into its components.
func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// setupTree creates the sandbox's host tree: <root>/home/<user> (the home
// and work dir) and <root>/tmp, owned and moded as the sandbox user needs.
func (sb *sandbox) setupTree(m method, dir, id, user string) error {
	sb.root = filepath.Join(dir, id)
	sb.hostHome = filepath.Join(sb.root, "home", user)
	hostTmp := filepath.Join(sb.root, "tmp")
	for _, d := range []string{sb.hostHome, hostTmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if m == methodHost {
		sb.home = sb.hostHome
		sb.tmp = hostTmp
		// Commands on the host layout share the host's /tmp, so the
		// toolbox reaches it too (a stdin file, a command's output files).
		sb.view = &pathView{mounts: []mountPoint{{sb.root, sb.root}, {"/tmp", "/tmp"}}, method: m}
		return nil
	}
	sb.home = "/home/" + user
	sb.tmp = sandboxTmp
	sb.view = &pathView{mounts: []mountPoint{
		{"/home", filepath.Join(sb.root, "home")},
		{sandboxTmp, hostTmp},
	}, method: m}
	// Sticky, as a sandbox's /tmp is: Go's os.Chmod takes the sticky bit
	// as os.ModeSticky and drops a raw 0o1000.
	if err := os.Chmod(hostTmp, 0o777|os.ModeSticky); err != nil {
		return err
	}
	if err := writeUserDB(sb.root, user); err != nil {
		return err
	}
	return sb.view.own(sb.hostHome)
}

// writeUserDB writes the sandbox's /etc/passwd and /etc/group (the stage
// binds them over the host's): the host's entries, except that uid and gid
// 1000 are the sandbox user's, so the shell prompt and id name the
// sandbox user, not whoever has uid 1000 on the host.
func writeUserDB(root, user string) error {
	for _, f := range []struct{ host, line string }{
		{"/etc/passwd", user + ":x:1000:1000::/home/" + user + ":/bin/bash"},
		{"/etc/group", user + ":x:1000:"},
	} {
		b, _ := os.ReadFile(f.host) // no host file: only the sandbox user
		var out []string
		for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			fs := strings.Split(l, ":")
			if l == "" || (len(fs) > 2 && (fs[2] == "1000" || fs[0] == user)) {
				continue
			}
			out = append(out, l)
		}
		out = append(out, f.line)
		if err := os.WriteFile(filepath.Join(root, filepath.Base(f.host)), []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// own gives a host file the sandbox user's ownership, as files the
// daemon's user creates have: needed as root (commands run as uid 1000);
// under a user namespace our own uid already is 1000 inside.
func (v *pathView) own(host string) error {
	if v.method != methodRootNS {
		return nil
	}
	return os.Lchown(host, sandboxUID, sandboxGID)
}

// mkdirAll is os.MkdirAll that gives every directory it creates the
// sandbox user's ownership.
func (v *pathView) mkdirAll(host string, mode os.FileMode) error {
	if fi, err := os.Stat(host); err == nil {
		if !fi.IsDir() {
			return &os.PathError{Op: "mkdir", Path: host, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if parent := filepath.Dir(host); parent != host {
		if err := v.mkdirAll(parent, mode); err != nil {
			return err
		}
	}
	if err := os.Mkdir(host, mode); err != nil {
		if fi, serr := os.Stat(host); serr == nil && fi.IsDir() {
			return nil // created concurrently
		}
		return err
	}
	return v.own(host)
}

// viewIDs maps a host uid/gid to what the sandbox sees.
func (v *pathView) viewIDs(uid, gid uint32) (uint32, uint32) {
	if v.method != methodUserNS {
		return uid, gid
	}
	m := func(id, ours, inside uint32) uint32 {
		if id == ours {
			return inside
		}
		return 65534 // unmapped: nobody
	}
	return m(uid, uint32(os.Getuid()), sandboxUID), m(gid, uint32(os.Getgid()), sandboxGID)
}

// hostID maps an owner (or group) the toolbox is asked for to a host id:
// the sandbox user's name and id are 1000 inside the namespace.
func (v *pathView) hostID(name, user string, ours int) (int, bool) {
	if v.method == methodHost {
		return 0, false
	}
	id := -1
	switch name {
	case user, fmt.Sprint(sandboxUID):
		id = sandboxUID
	case "root", "0":
		id = 0
	default:
		return 0, false
	}
	if v.method == methodUserNS {
		if id != sandboxUID {
			return -2, true // not mapped: the chown fails with EPERM
		}
		return ours, true
	}
	return id, true
}

// command builds the process for argv in the sandbox: its work dir dir (a
// sandbox path), environment env, and tty (a PTY's login shell, which
// needs its own session rather than a process group). Every process a
// sandbox runs is built here, so one-shot executes, sessions and PTYs see
// the same namespace, user and paths as the file APIs.
func (sb *sandbox) command(argv []string, dir string, env []string, tty bool) (*osexec.Cmd, error) {
	hostDir, err := sb.resolve(dir, true)
	if errors.Is(err, errEscape) {
		// Outside the sandbox's own dirs (e.g. /etc): there the sandbox
		// sees the host's, and may start a command as on Daytona.
		hostDir, err = dir, nil
	}
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(hostDir); err == nil && !fi.IsDir() {
			err = syscall.ENOTDIR
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "chdir", Path: dir, Err: pathErrno(err)}
	}
	if sb.view.method == methodHost {
		cmd := osexec.Command(argv[0], argv[1:]...)
		cmd.Dir = hostDir
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: !tty}
		return cmd, nil
	}
	return sb.stageCommand(argv, dir, env, tty)
}

func pathErrno(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// sessionScripts returns how a session's shell names the scripts the
// emulator writes into its state dir (the `source` argument prefix) and
// the files the shell must inherit for that. In a namespace the state dir
// is not mounted, so the shell reaches it through an inherited directory
// descriptor (fd 4) instead of its host path.
func (sb *sandbox) sessionScripts(dir string) (string, []*os.File, error) {
	if sb.view.method == methodHost {
		return dir, nil, nil
	}
	if err := sb.view.own(dir); err != nil {
		return "", nil, err
	}
	f, err := os.Open(dir)
	if err != nil {
		return "", nil, err
	}
	return "/proc/self/fd/4", []*os.File{f}, nil
}

// HostPath maps a path as the sandbox names it (absolute, or relative to
// its home) to where the emulator keeps it on the host, without following
// symlinks; "" when it lies outside the sandbox. On the host layout the two
// are the same.
func (i SandboxInfo) HostPath(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(i.HomeDir, p)
	}
	h, _ := i.view.hostOf(filepath.Clean(p))
	return h
}

// Own gives a host file or directory a test created (at HostPath) the
// ownership the sandbox user would have given it, so the sandbox's
// commands, which run as uid 1000, can use it as their own.
func (i SandboxInfo) Own(host string) error { return i.view.own(host) }

// WriteFile writes a file into the sandbox from the test side (p as the
// sandbox names it), creating missing parents, all owned as the sandbox
// user would own them.
func (i SandboxInfo) WriteFile(p string, data []byte, perm os.FileMode) error {
	host := i.HostPath(p)
	if host == "" {
		return &os.PathError{Op: "write", Path: p, Err: errEscape}
	}
	if err := i.view.mkdirAll(filepath.Dir(host), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(host, data, perm); err != nil {
		return err
	}
	return i.view.own(host)
}
