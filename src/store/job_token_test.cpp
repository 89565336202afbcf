// The job token, the job secret (where it comes from, which files are
// refused), and the store handshake that proves the secret: right secret,
// wrong secret, a secret on one side only, a replayed answer, and a server
// that cannot prove the secret back.
#include "store/job_token.h"
#include "store/store_join.h"
#include "settings/job_settings.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "store/socket.h"
#include "store/store_wire.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "util/error.h"

namespace gpudiag {
namespace {

using Vars = std::map<std::string, std::string>;
using namespace std::chrono_literals;
namespace sw = storewire;

TEST(JobToken, ExplicitTokenWins) {
  Env env(Vars{{"GPUDIAG_TOKEN", "abc"}, {"SLURM_JOB_ID", "12"}, {"TORCHELASTIC_RUN_ID", "r"}});
  EXPECT_EQ(read_job_token(env).value, "abc");
  EXPECT_EQ(read_job_token(env).source, "GPUDIAG_TOKEN");
}

TEST(JobToken, SlurmJobAndStep) {
  EXPECT_EQ(read_job_token(Env(Vars{{"SLURM_JOB_ID", "12"}, {"SLURM_STEP_ID", "3"}})).value,
            "slurm-12.3");
  EXPECT_EQ(read_job_token(Env(Vars{{"SLURM_JOB_ID", "12"}})).value, "slurm-12");
  // An empty GPUDIAG_TOKEN counts as unset.
  EXPECT_EQ(read_job_token(Env(Vars{{"GPUDIAG_TOKEN", ""}, {"SLURM_JOB_ID", "9"}})).value, "slurm-9");
}

TEST(StoreAddress, UnderSlurmEveryTaskDerivesOnePortBelowTheEphemeralRange) {
  World w;
  w.launcher = Launcher::slurm;
  w.size = 4;
  for (long long job : {0LL, 1LL, 36244LL, 9876543210LL, -5LL}) {
    Vars v{{"SLURM_JOB_ID", std::to_string(job)}, {"SLURM_STEP_ID", "2"},
           {"SLURM_STEP_NODELIST", "node[03-05]"}};
    auto a = read_store_address(w, Env(v));
    EXPECT_EQ(a.host, "node03");
    EXPECT_GE(a.port, 20000) << job;
    EXPECT_LT(a.port, 32768) << job;  // Linux hands out 32768 and up to servers on port 0
    w.rank = 3;
    EXPECT_EQ(read_store_address(w, Env(v)).port, a.port);
    w.rank = 0;
  }
}

TEST(JobToken, TorchElasticRunIdThenDefault) {
  EXPECT_EQ(read_job_token(Env(Vars{{"TORCHELASTIC_RUN_ID", "none"}})).value, "torchelastic-none");
  EXPECT_EQ(read_job_token(Env()).value, "gpudiag-by-hand");
}

// --- where the secret comes from -------------------------------------------------

/// A file in a fresh temporary directory, removed with it.
struct TempFile {
  explicit TempFile(const std::string& content, mode_t mode) {
    char tmpl[] = "/tmp/gpudiag-secret-XXXXXX";
    dir = ::mkdtemp(tmpl);
    path = dir + "/secret";
    std::ofstream(path) << content;
    ::chmod(path.c_str(), mode);
  }
  ~TempFile() {
    std::remove(path.c_str());
    ::rmdir(dir.c_str());
  }
  std::string dir, path;
};

TEST(JobSecret, VariableThenFileThenNone) {
  TempFile f("from-file\n", 0600);
  auto s = read_job_secret(Env(Vars{{"GPUDIAG_SECRET", "v"}, {"GPUDIAG_SECRET_FILE", f.path}}));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->key, "v");
  s = read_job_secret(Env(Vars{{"GPUDIAG_SECRET", ""}, {"GPUDIAG_SECRET_FILE", f.path}}));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->key, "from-file");  // the trailing newline is not part of it
  EXPECT_EQ(s->source, "GPUDIAG_SECRET_FILE " + f.path);
  EXPECT_FALSE(read_job_secret(Env()));
}

TEST(JobSecret, AFileOthersMayReadIsRefusedInOneLine) {
  TempFile f("s3cret", 0644);
  try {
    read_secret_file(f.path, "--secret-file");
    FAIL() << "a 0644 secret file was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(e.one_line().find("has mode 0644"), std::string::npos) << e.one_line();
    EXPECT_NE(e.one_line().find("chmod 600"), std::string::npos) << e.one_line();
    EXPECT_EQ(e.one_line().find('\n'), std::string::npos);
  }
  TempFile g("s3cret", 0640);
  EXPECT_THROW(read_job_secret(Env(Vars{{"GPUDIAG_SECRET_FILE", g.path}})), UsageError);
  TempFile empty("", 0600);
  EXPECT_THROW(read_secret_file(empty.path, "--secret-file"), UsageError);
  EXPECT_THROW(read_secret_file(f.dir, "--secret-file"), UsageError);  // not a regular file
  EXPECT_THROW(read_secret_file(f.dir + "/absent", "--secret-file"), UsageError);
}

TEST(JobSecret, RandomSecretsAreLongAndDiffer) {
  auto a = random_secret(), b = random_secret();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
}

// --- the proofs ------------------------------------------------------------------

TEST(StoreProof, DependsOnEveryInputAndSide) {
  const std::string sn(32, 'a'), cn(32, 'b');
  auto p = sw::client_proof("k", sn, cn, "tok", 1);
  EXPECT_EQ(p.size(), sw::kProofBytes);
  EXPECT_TRUE(sw::proofs_equal(p, sw::client_proof("k", sn, cn, "tok", 1)));
  EXPECT_FALSE(sw::proofs_equal(p, sw::client_proof("K", sn, cn, "tok", 1)));
  EXPECT_FALSE(sw::proofs_equal(p, sw::client_proof("k", std::string(32, 'c'), cn, "tok", 1)));
  EXPECT_FALSE(sw::proofs_equal(p, sw::client_proof("k", sn, cn, "tok2", 1)));
  EXPECT_FALSE(sw::proofs_equal(p, sw::client_proof("k", sn, cn, "tok", 2)));
  EXPECT_FALSE(sw::proofs_equal(p, sw::server_proof("k", sn, cn, "tok", 1)));
  EXPECT_FALSE(sw::proofs_equal(p, p.substr(0, 31)));
  EXPECT_NE(sw::random_nonce(), sw::random_nonce());
}

// --- the handshake against a real server -----------------------------------------

std::unique_ptr<TcpStoreServer> serve(const std::string& secret) {
  TcpStoreServerOptions o;
  o.bind_host = "127.0.0.1";
  o.token = "job";
  o.secret = secret;
  o.world_size = 4;
  return std::make_unique<TcpStoreServer>(o);
}

/// The one-line error a client gets joining `server` with `secret`; empty when it joins.
std::string join_error(TcpStoreServer& server, const std::string& secret) {
  try {
    TcpStoreClient c("127.0.0.1", server.port(), "job", Deadline::after(5s), secret, 1);
    return {};
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    return e.one_line();
  }
}

TEST(StoreHandshake, TheRightSecretJoinsAndIsAuthenticated) {
  auto server = serve("s1");
  TcpStoreClient a("127.0.0.1", server->port(), "job", Deadline::after(5s), "s1", 0);
  TcpStoreClient b("127.0.0.1", server->port(), "job", Deadline::after(5s), "s1", sw::kNoRank);
  EXPECT_TRUE(a.authenticated());
  a.set("k", "v", Deadline::after(5s));
  EXPECT_EQ(b.get("k", Deadline::after(5s)), "v");
}

TEST(StoreHandshake, AWrongSecretIsRefusedInOneLine) {
  auto server = serve("s1");
  auto err = join_error(*server, "s2");
  EXPECT_NE(err.find("the store at 127.0.0.1:" + std::to_string(server->port()) +
                     " refused this rank's job secret: ranks of one job must share "
                     "GPUDIAG_SECRET or --secret-file"),
            std::string::npos)
      << err;
  EXPECT_GE(server->stats().dropped, 1u);
  EXPECT_EQ(join_error(*server, "s1"), "");  // the store still serves the job
}

TEST(StoreHandshake, ASecretOnOneSideOnlyIsRefused) {
  auto with = serve("s1");
  auto err = join_error(*with, "");
  EXPECT_NE(err.find("refused this rank's job secret"), std::string::npos) << err;
  EXPECT_NE(err.find("this rank has none"), std::string::npos) << err;

  auto without = serve("");
  err = join_error(*without, "s1");
  EXPECT_NE(err.find("refused this rank's job secret"), std::string::npos) << err;
  EXPECT_NE(err.find("has no job secret"), std::string::npos) << err;

  TcpStoreClient plain("127.0.0.1", without->port(), "job", Deadline::after(5s));
  EXPECT_FALSE(plain.authenticated());  // no secret anywhere: works, unauthenticated
}

/// A hand-driven handshake: HELLO claiming `rank` with `client_nonce`; returns
/// the first answer frame's type and payload.
struct RawHandshake {
  RawHandshake(int port, std::uint32_t rank, const std::string& client_nonce)
      : fd(net::connect_with_retry("127.0.0.1", port, Deadline::after(5s))) {
    std::string hello(sw::kMagic);
    hello += sw::Writer(sw::Type::hello, 0)
                 .u16(sw::kVersion)
                 .str("job")
                 .u8(static_cast<std::uint8_t>(sw::Auth::hmac_sha256))
                 .u32(rank)
                 .str(client_nonce)
                 .finish();
    send(hello);
  }
  void send(const std::string& bytes) {
    EXPECT_EQ(net::send_all(fd.get(), bytes.data(), bytes.size(), Deadline::after(5s)),
              net::Io::ok);
  }
  /// The next frame: its type and payload; type 0 when the server closed.
  std::pair<int, std::string> next() {
    sw::Frame f{};
    while (!sw::next_frame(in, f))
      if (net::recv_some(fd.get(), in, Deadline::after(5s)) != net::Io::ok) return {0, {}};
    std::pair<int, std::string> out{int(f.type), std::string(f.payload)};
    in.erase(0, f.total);
    return out;
  }
  std::string nonce_of(const std::string& challenge) {
    sw::Reader r(challenge);
    return r.str();
  }
  net::Fd fd;
  std::string in;
};

TEST(StoreHandshake, AReplayedAnswerToANewNonceFails) {
  auto server = serve("s1");
  const std::string cn(32, 'n');
  // A rank's real handshake, whose answer an eavesdropper records.
  RawHandshake real(server->port(), 1, cn);
  auto [type, challenge] = real.next();
  ASSERT_EQ(type, int(sw::Type::challenge));
  auto answer = sw::Writer(sw::Type::auth, 0)
                    .str(sw::client_proof("s1", real.nonce_of(challenge), cn, "job", 1))
                    .finish();
  real.send(answer);
  EXPECT_EQ(real.next().first, int(sw::Type::hello_ok));

  // The same HELLO and the recorded answer on a new connection: a new nonce.
  RawHandshake replay(server->port(), 1, cn);
  auto [type2, challenge2] = replay.next();
  ASSERT_EQ(type2, int(sw::Type::challenge));
  EXPECT_NE(replay.nonce_of(challenge2), real.nonce_of(challenge));
  replay.send(answer);
  auto [type3, error] = replay.next();
  ASSERT_EQ(type3, int(sw::Type::error));
  EXPECT_EQ(static_cast<sw::ErrorCode>(error[0]), sw::ErrorCode::secret_refused);
  EXPECT_EQ(replay.next().first, 0);  // and closed

  // A right proof for another rank claim fails as well.
  RawHandshake other(server->port(), 2, cn);
  auto [type4, challenge4] = other.next();
  ASSERT_EQ(type4, int(sw::Type::challenge));
  other.send(sw::Writer(sw::Type::auth, 0)
                 .str(sw::client_proof("s1", other.nonce_of(challenge4), cn, "job", 1))
                 .finish());
  EXPECT_EQ(other.next().first, int(sw::Type::error));
}

TEST(StoreHandshake, AServerThatCannotProveTheSecretIsRefused) {
  // A process posing as the store: it challenges, accepts any answer, and
  // cannot compute the server's proof.
  auto listener = net::listen_on("127.0.0.1", 0);
  const int port = net::bound_port(listener.get());
  std::thread fake([&] {
    pollfd p{listener.get(), POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) return;
    net::Fd c(::accept(listener.get(), nullptr, nullptr));
    std::string in;
    sw::Frame f{};
    auto read_frame = [&](std::size_t skip) {
      while (in.size() < skip || !sw::next_frame(std::string_view(in).substr(skip), f))
        if (net::recv_some(c.get(), in, Deadline::after(5s)) != net::Io::ok) return false;
      in.erase(0, skip + f.total);
      return true;
    };
    if (!read_frame(sw::kMagic.size())) return;
    auto ch = sw::Writer(sw::Type::challenge, 0).str(std::string(32, 'x')).finish();
    net::send_all(c.get(), ch.data(), ch.size(), Deadline::after(5s));
    if (!read_frame(0)) return;
    auto ok =
        sw::Writer(sw::Type::hello_ok, 0).u16(sw::kVersion).str(std::string(32, '\0')).finish();
    net::send_all(c.get(), ok.data(), ok.size(), Deadline::after(5s));
    std::string rest;
    net::recv_some(c.get(), rest, Deadline::after(5s));
  });
  std::string err;
  try {
    TcpStoreClient c("127.0.0.1", port, "job", Deadline::after(5s), "s1", 1);
  } catch (const UsageError& e) {
    err = e.one_line();
  }
  fake.join();
  EXPECT_NE(err.find("did not prove it knows the job's secret"), std::string::npos) << err;
}

}  // namespace
}  // namespace gpudiag
