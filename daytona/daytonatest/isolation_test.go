package daytonatest_test

import (
	"fmt"
	"net/url"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// isolatedTC is a test client whose sandboxes run in a namespace by
// method iso. Without namespaces (not Linux, or no privilege) the test is
// skipped, except in CI, where the emulator runs as root and must isolate.
func isolatedTC(t *testing.T, iso daytonatest.Isolation) *tc {
	t.Helper()
	c := newTC(t, daytonatest.WithIsolation(iso))
	if ok, why := c.srv.Isolated(); !ok {
		if runtime.GOOS == "linux" && os.Getenv("CI") != "" {
			t.Fatalf("no sandbox namespace in CI: %s", why)
		}
		t.Skip("no sandbox namespace here: " + why)
	}
	return c
}

// eachIsolation runs f for the default method (a plain mount namespace
// when root) and for the user-namespace method.
func eachIsolation(t *testing.T, f func(t *testing.T, iso daytonatest.Isolation, c *tc)) {
	for _, iso := range []daytonatest.Isolation{daytonatest.IsolationAuto, daytonatest.IsolationUserNS} {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			f(t, iso, isolatedTC(t, iso))
		})
	}
}

// oneShot runs cmd with POST /process/execute.
func (c *tc) oneShot(id, cmd string) (int, string) {
	c.t.Helper()
	st, b := c.tb(id, "POST", "/process/execute", map[string]any{"command": cmd})
	require.Equal(c.t, 200, st, string(b))
	r := decode[struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}](c.t, b)
	return r.ExitCode, r.Result
}

// inPTY runs cmd in a fresh PTY's login shell and returns everything the
// terminal showed until the shell exited.
func (c *tc) inPTY(t *testing.T, id, cmd string) string {
	t.Helper()
	conn := connectPTY(t, c, id, "p-"+randName())
	require.NoError(t, conn.Write(ctxT(t), websocket.MessageBinary, []byte(cmd+"; exit\n")))
	out, _, _ := readAll(ctxT(t), conn)
	return string(out)
}

var ptySeq atomic.Int64

func randName() string { return fmt.Sprint(ptySeq.Add(1)) }

func ownerOf(t *testing.T, p string) (uint32, uint32) {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

// whoami prints the user, work dir and environment as a command sees them.
// The PTY echoes the command line, so the answer is only recognisable
// once expanded.
// The user and group names are the sandbox's, whoever has uid 1000 on the
// host; /tmp is world-writable and sticky.
const whoami = `echo "R:$(id -u):$(id -g):$(pwd):$HOME:$USER:$TMPDIR:$(id -un):$(id -gn):$(stat -c %a /tmp):"`

const wantWhoami = "R:1000:1000:/home/daytona:/home/daytona:daytona:/tmp:daytona:daytona:1777:"

// Every way a sandbox runs a command (one-shot execute, a session, a PTY)
// runs it as uid/gid 1000 in /home/daytona with /tmp as TMPDIR, and the
// toolbox reports /home/daytona as work and home dir, as on Daytona.
func TestSandboxRunsAsDaytonaUserInHome(t *testing.T) {
	eachIsolation(t, func(t *testing.T, iso daytonatest.Isolation, c *tc) {
		sb := c.create(nil)
		code, out := c.oneShot(sb.ID, whoami)
		assert.Equal(t, 0, code)
		assert.Equal(t, wantWhoami+"\n", out, "one-shot")
		c.session(sb.ID, "s")
		r := c.exec(sb.ID, "s", whoami, false)
		assert.Equal(t, wantWhoami+"\n", *r.Stdout, "session")
		assert.Contains(t, c.inPTY(t, sb.ID, whoami), wantWhoami, "pty")
		for _, route := range []string{"/work-dir", "/user-home-dir"} {
			st, b := c.tb(sb.ID, "GET", route, nil)
			require.Equal(t, 200, st)
			assert.JSONEq(t, `{"dir":"/home/daytona"}`, string(b), route)
		}
		info, _ := c.srv.Sandbox(sb.ID)
		assert.Equal(t, "/home/daytona", info.HomeDir)
		assert.Equal(t, "/home/daytona", info.WorkDir)
	})
}

// A sandbox's /tmp is its own: a file uploaded to /tmp/x is what `cat
// /tmp/x` shows in a one-shot execute, a session and a PTY; what a command
// writes to /tmp the file APIs read back; another sandbox and the host do
// not see either. Uploaded files belong to the sandbox user, and a symlink
// to an absolute sandbox path resolves inside the sandbox.
func TestSandboxTmpIsItsOwn(t *testing.T) {
	eachIsolation(t, func(t *testing.T, iso daytonatest.Isolation, c *tc) {
		a, b := c.create(nil), c.create(nil)
		name := "/tmp/daytonatest-own-" + a.ID
		st, body := c.upload(a.ID, map[string][]byte{name: []byte("from-api")}, []string{name})
		require.Equal(t, 200, st, string(body))
		_, err := os.Stat(name)
		assert.True(t, os.IsNotExist(err), "not in the host's /tmp: %v", err)

		code, out := c.oneShot(a.ID, "cat "+name)
		assert.Equal(t, 0, code)
		assert.Equal(t, "from-api", out, "one-shot")
		c.session(a.ID, "s")
		r := c.exec(a.ID, "s", "cat "+name+"; echo from-cmd > "+name+".cmd; ln -s "+name+" /home/daytona/link", false)
		assert.Equal(t, 0, *r.ExitCode, *r.Output)
		assert.Equal(t, "from-api\n", *r.Stdout, "session (a final line gets its newline)")
		assert.Contains(t, c.inPTY(t, a.ID, "echo \"P:$(cat "+name+")\""), "P:from-api", "pty")

		st, got := c.tb(a.ID, "GET", "/files/download?path="+url.QueryEscape(name+".cmd"), nil)
		require.Equal(t, 200, st)
		assert.Equal(t, "from-cmd\n", string(got))
		st, got = c.tb(a.ID, "GET", "/files/download?path=link", nil)
		require.Equal(t, 200, st)
		assert.Equal(t, "from-api", string(got), "an absolute symlink target is a sandbox path")
		st, got = c.tb(a.ID, "GET", "/files/info?path="+url.QueryEscape(name), nil)
		require.Equal(t, 200, st)
		assert.Contains(t, string(got), `"owner":"1000"`)
		assert.Contains(t, string(got), `"group":"1000"`)

		st, _ = c.tb(b.ID, "GET", "/files/download?path="+url.QueryEscape(name), nil)
		assert.Equal(t, 404, st, "another sandbox's /tmp")
		code, _ = c.oneShot(b.ID, "cat "+name)
		assert.NotEqual(t, 0, code, "another sandbox's /tmp")
	})
}

// The sandbox user is not root: it cannot write a 0444 file or into a
// 0555 directory the toolbox made read-only, nor into the host's system
// directories (as root's method).
func TestSandboxUserHonoursReadOnlyModes(t *testing.T) {
	eachIsolation(t, func(t *testing.T, iso daytonatest.Isolation, c *tc) {
		sb := c.create(nil)
		st, body := c.upload(sb.ID, map[string][]byte{"ro.txt": []byte("keep")}, []string{"ro.txt"})
		require.Equal(t, 200, st, string(body))
		st, _ = c.tb(sb.ID, "POST", "/files/permissions?path=ro.txt&mode=444", nil)
		require.Equal(t, 200, st)
		st, _ = c.tb(sb.ID, "POST", "/files/folder?path=ro-dir&mode=555", nil)
		require.Equal(t, 201, st)
		cmds := []string{"echo x > ro.txt", "touch ro-dir/new"}
		if os.Geteuid() == 0 && iso == daytonatest.IsolationAuto {
			// Under a user namespace uid 1000 is our own uid on the host,
			// so only root's method keeps it out of root's files.
			t.Cleanup(func() { _ = os.Remove("/etc/daytonatest-probe") })
			cmds = append(cmds, "touch /etc/daytonatest-probe")
		}
		c.session(sb.ID, "s")
		for _, cmd := range cmds {
			r := c.exec(sb.ID, "s", cmd, false)
			assert.NotEqual(t, 0, *r.ExitCode, cmd)
			assert.Contains(t, *r.Stderr, "Permission denied", cmd)
			code, out := c.oneShot(sb.ID, cmd)
			assert.NotEqual(t, 0, code, cmd)
			assert.Contains(t, out, "Permission denied", cmd)
		}
		st, got := c.tb(sb.ID, "GET", "/files/download?path=ro.txt", nil)
		require.Equal(t, 200, st)
		assert.Equal(t, "keep", string(got))
		st, _ = c.tb(sb.ID, "GET", "/files/info?path=ro-dir/new", nil)
		assert.Equal(t, 404, st)
	})
}

// Files the toolbox creates belong to the sandbox user on the host too
// (as root; under a user namespace our own uid is that user).
func TestToolboxFilesBelongToSandboxUser(t *testing.T) {
	c := isolatedTC(t, daytonatest.IsolationAuto)
	if os.Geteuid() != 0 {
		t.Skip("only root creates files for another uid")
	}
	sb := c.create(nil)
	st, body := c.upload(sb.ID, map[string][]byte{"d/e/f.txt": []byte("x")}, []string{"d/e/f.txt"})
	require.Equal(t, 200, st, string(body))
	st, _ = c.tb(sb.ID, "POST", "/files/folder?path=g/h&mode=755", nil)
	require.Equal(t, 201, st)
	info, _ := c.srv.Sandbox(sb.ID)
	for _, p := range []string{"d", "d/e", "d/e/f.txt", "g", "g/h"} {
		uid, gid := ownerOf(t, info.HostPath(p))
		assert.Equal(t, [2]uint32{1000, 1000}, [2]uint32{uid, gid}, p)
	}
}

// As a non-root user (the suite reruns this test as nobody when it runs
// as root) the emulator gives sandboxes Daytona's layout through an
// unprivileged user namespace where the host allows one; where it does
// not, commands run on the host layout as that user and the emulator
// says why.
func TestSandboxLayoutAsNonRootUser(t *testing.T) {
	if testenv.RunAsNonRoot(t) {
		return
	}
	c := newTC(t, daytonatest.WithIsolation(daytonatest.IsolationAuto))
	sb := c.create(nil)
	ok, why := c.srv.Isolated()
	code, out := c.oneShot(sb.ID, whoami)
	require.Equal(t, 0, code, out)
	if !ok {
		require.NotEmpty(t, why)
		assert.Equal(t, fmt.Sprintf("R:%d:%d:", os.Getuid(), os.Getgid()), out[:len(fmt.Sprintf("R:%d:%d:", os.Getuid(), os.Getgid()))])
		t.Logf("host layout: %s", why)
		return
	}
	assert.Equal(t, wantWhoami+"\n", out)
	c.session(sb.ID, "s")
	r := c.exec(sb.ID, "s", whoami+"; touch /tmp/mine && stat -c %u:%g /tmp/mine", false)
	assert.Equal(t, wantWhoami+"\n1000:1000\n", *r.Stdout)
	assert.Contains(t, c.inPTY(t, sb.ID, whoami), wantWhoami)
}

// A command may start anywhere the sandbox sees, its own dirs or the
// host's system dirs (as in a container), and a missing work dir is the
// usual chdir error.
func TestSandboxCommandCwd(t *testing.T) {
	eachIsolation(t, func(t *testing.T, _ daytonatest.Isolation, c *tc) {
		sb := c.create(nil)
		for cwd, want := range map[string]string{"/etc": "/etc", "/tmp": "/tmp", "sub/..": "/home/daytona"} {
			st, b := c.tb(sb.ID, "POST", "/process/execute", map[string]any{"command": "pwd", "cwd": cwd})
			require.Equal(t, 200, st)
			assert.JSONEq(t, `{"exitCode":0,"result":"`+want+`\n"}`, string(b), cwd)
		}
		st, b := c.tb(sb.ID, "POST", "/process/execute", map[string]any{"command": "pwd", "cwd": "/home/daytona/missing"})
		require.Equal(t, 200, st)
		assert.JSONEq(t, `{"exitCode":-1,"result":"chdir /home/daytona/missing: no such file or directory"}`, string(b))
	})
}
