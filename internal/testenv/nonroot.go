package testenv

import (
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// nonRootEnv marks the child run of RunAsNonRoot, so it does not recurse.
const nonRootEnv = "DAYTONA_WORKER_TEST_NONROOT_CHILD"

// nobody is the uid and gid the child runs as.
const nobody = "65534"

// RunAsNonRoot makes a test that needs a non-root user (a read-only
// directory refuses writes only to such a user) run as one even when the
// suite runs as root, as it does in CI containers: as root it runs the same
// test, alone, in a copy of the test binary under setpriv as nobody, fails
// when that child fails or skips, and returns true (the caller returns).
// As any other user it returns false and the test runs in place. Without
// setpriv it skips, naming what is missing.
func RunAsNonRoot(t *testing.T) (ranInChild bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	if os.Getenv(nonRootEnv) != "" {
		t.Fatal("the non-root child of this test still runs as root")
	}
	setpriv, err := osexec.LookPath("setpriv")
	if err != nil {
		t.Skip("running as root without setpriv (util-linux): cannot run this test as a non-root user")
	}
	// The test binary sits in a root-only build dir: copy it where nobody
	// can read and run it.
	dir, err := os.MkdirTemp("", "nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "test")
	if err := copyExecutable(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(setpriv, "--reuid="+nobody, "--regid="+nobody, "--clear-groups", "--",
		bin, "-test.run", "^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), nonRootEnv+"=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	text := string(out)
	switch {
	case err != nil:
		t.Fatalf("as nobody: %v\n%s", err, text)
	case !strings.Contains(text, "--- PASS: "+t.Name()):
		t.Fatalf("as nobody the test did not pass (skipped or not found):\n%s", text)
	}
	t.Logf("ran as uid %s in a child process: passed", nobody)
	return true
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
