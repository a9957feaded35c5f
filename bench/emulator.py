"""What the emulator benchmarks share: a release build of forge, the launcher (moto and the
Google emulators on one port) started on a free port, its control paths, and the state buckets
a stack keeps its state in."""

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start(phase_seconds):
    """Builds forge (release) and the emulator's venv, starts the launcher with phases of
    `phase_seconds`: (forge's path, the launcher's process, its URL)."""
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    subprocess.run([os.path.join(ROOT, "scripts", "setup-moto")], cwd=ROOT, check=True)
    launcher = subprocess.Popen(
        [os.path.join(ROOT, ".venv", "bin", "python"), os.path.join(ROOT, "tests", "moto", "launcher.py"), "--port", "0",
         "--phase-seconds", str(phase_seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    url = "http://127.0.0.1:" + launcher.stdout.readline().strip().split("=", 1)[1]
    return os.path.join(ROOT, "target", "release", "forge"), launcher, url


@contextlib.contextmanager
def running(phase_seconds, name):
    """A bench's run: forge and the launcher started (see `start`) and a working folder,
    `(forge, url, work)`; the launcher stopped and the folder removed afterwards."""
    work = tempfile.mkdtemp(prefix=f"forge-{name}-bench-")
    forge, launcher, url = start(phase_seconds)
    try:
        yield forge, url, work
    finally:
        launcher.terminate()
        shutil.rmtree(work, ignore_errors=True)


def aws_env(url, account, region="us-west-2", **extra):
    """forge's environment for the emulator as `account` in `region`: the standard AWS
    variables only (no profile, no instance metadata), plain output, and `extra` besides."""
    env = dict(os.environ, AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID=account, AWS_SECRET_ACCESS_KEY="bench", AWS_REGION=region,
               AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null", NO_COLOR="1",
               **extra)
    env.pop("AWS_PROFILE", None)
    return env


def s3_bucket(url, account, name, region):
    """Creates the S3 bucket `name` of `account` in `region` on the emulator (through the venv's
    boto3)."""
    where = "" if region == "us-east-1" else f", CreateBucketConfiguration={{'LocationConstraint': '{region}'}}"
    subprocess.run([os.path.join(ROOT, ".venv", "bin", "python"), "-c",
                    "import boto3, sys; boto3.client('s3', endpoint_url=sys.argv[1], region_name=sys.argv[4], "
                    f"aws_access_key_id=sys.argv[2], aws_secret_access_key='x').create_bucket(Bucket=sys.argv[3]{where})",
                    url, account, name, region], check=True)


def gcs_bucket(url, project, name):
    """Creates the Cloud Storage bucket `name` of `project` on the emulator."""
    request = urllib.request.Request(f"{url}/storage/v1/b?project={project}", data=json.dumps({"name": name}).encode(), method="POST")
    with urllib.request.urlopen(request):
        pass


def control(url, method, path, body=None):
    """A call to one of the launcher's /_forge/ control paths: its JSON answer."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read() or b"null")


def calls(url, account):
    """The calls `account` made since the last look, by name; the counter starts again."""
    counted = control(url, "GET", f"/_forge/calls?account={account}")
    control(url, "POST", f"/_forge/reset?account={account}", {})
    return counted


def emit(lines, out):
    """Prints the report's Markdown `lines` and, with `out`, writes them to that file too."""
    report = "\n".join(lines) + "\n"
    print(report)
    if out:
        with open(out, "w") as file:
            file.write(report)
