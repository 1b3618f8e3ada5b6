// The pure side of rdmactl's kubectl habits: label selectors (cli/selector.h), --sort-by (cli/sort.h), -o yaml
// (cli/yaml.h), the config file and the settings' precedence (cli/config_file.h), --no-headers (Table).
#include <cstdlib>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/config_file.h"
#include "cli/output.h"
#include "cli/selector.h"
#include "cli/sort.h"
#include "cli/yaml.h"

namespace rdmad::cli {
namespace {

using ::testing::HasSubstr;

bool Match(const std::string& selector, const std::string& label) {
  absl::StatusOr<Selector> s = Selector::Parse(selector);
  EXPECT_TRUE(s.ok()) << selector << ": " << s.status();
  return s.ok() && s->Matches(label);
}

TEST(Selector, LabelIsCommaSeparatedPairsAndBareKeys) {
  auto pairs = ParseLabel(" app = web,tier=db, demo ,");
  EXPECT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs["app"], "web");
  EXPECT_EQ(pairs["tier"], "db");
  EXPECT_EQ(pairs["demo"], "");
}

TEST(Selector, Equality) {
  EXPECT_TRUE(Match("app=web", "app=web,tier=db"));
  EXPECT_TRUE(Match("app==web", "app=web"));
  EXPECT_FALSE(Match("app=web", "app=webx"));
  EXPECT_FALSE(Match("app=web", "tier=web"));
  EXPECT_TRUE(Match("app=web,tier=db", "tier=db,app=web"));
  EXPECT_FALSE(Match("app=web,tier=db", "app=web,tier=cache"));
}

TEST(Selector, Inequality) {
  EXPECT_TRUE(Match("app!=web", "app=db"));
  EXPECT_TRUE(Match("app!=web", "tier=db"));  // missing counts
  EXPECT_FALSE(Match("app!=web", "app=web"));
}

TEST(Selector, ExistsAndMissing) {
  EXPECT_TRUE(Match("app", "app=web"));
  EXPECT_FALSE(Match("app", "tier=web"));
  EXPECT_TRUE(Match("!app", "tier=web"));
  EXPECT_FALSE(Match("!app", "app=x"));
}

TEST(Selector, BareWordMatchesALabelWithoutEquals) {
  EXPECT_TRUE(Match("demo", "demo"));
  EXPECT_FALSE(Match("demo", "demo2"));
  EXPECT_TRUE(Match("my demo", "my demo"));
  EXPECT_TRUE(Match("demo=", "demo"));
  EXPECT_FALSE(Match("demo", ""));
}

TEST(Selector, Sets) {
  EXPECT_TRUE(Match("env in (a, b)", "env=b"));
  EXPECT_FALSE(Match("env in (a,b)", "env=c"));
  EXPECT_FALSE(Match("env in (a,b)", "x=a"));
  EXPECT_TRUE(Match("env notin (a,b)", "env=c"));
  EXPECT_TRUE(Match("env notin (a,b)", "x=a"));
  EXPECT_FALSE(Match("env notin (a,b)", "env=a"));
  EXPECT_TRUE(Match("env in (a,b),app=web", "app=web,env=a"));
}

TEST(Selector, BadSelectorsSayWhy) {
  for (const char* bad : {"", " ", "a,,b", "=x", "!=x", "env in (a,b", "env in ()", "env in (a,)", "env (a)", "a=b=c"}) {
    absl::StatusOr<Selector> s = Selector::Parse(bad);
    EXPECT_FALSE(s.ok()) << "'" << bad << "'";
  }
  EXPECT_THAT(std::string(Selector::Parse("env in (a,b").status().message()), HasSubstr("')'"));
}

TEST(Sort, CellsCompareAsNumbersSizesOrNaturally) {
  EXPECT_LT(CompareCells("mrs/2", "mrs/10"), 0);
  EXPECT_LT(CompareCells("0x4f0", "0x30b0"), 0);
  EXPECT_LT(CompareCells("64KiB", "4MiB"), 0);
  EXPECT_LT(CompareCells("9", "10"), 0);
  EXPECT_EQ(CompareCells("abc", "abc"), 0);
  EXPECT_GT(CompareCells("b", "a"), 0);
}

TEST(Sort, FieldPaths) {
  const auto* d = v1::MemoryWindow::descriptor();
  EXPECT_TRUE(ParseFieldPath(d, ".binding.mr").ok());
  EXPECT_TRUE(ParseFieldPath(d, "{.binding.offset}").ok());
  EXPECT_TRUE(ParseFieldPath(d, "rkey").ok());
  EXPECT_THAT(std::string(ParseFieldPath(d, ".nope").status().message()), HasSubstr("no field 'nope'"));
  EXPECT_FALSE(ParseFieldPath(d, "{.rkey").ok());
  EXPECT_FALSE(ParseFieldPath(v1::MemoryRegion::descriptor(), ".access").ok());  // a list
  EXPECT_FALSE(ParseFieldPath(d, ".rkey.x").ok());

  v1::MemoryWindow a, b, unbound;
  a.mutable_binding()->set_offset(4096);
  b.mutable_binding()->set_offset(512);
  auto path = *ParseFieldPath(d, ".binding.offset");
  EXPECT_GT(CompareByField(a, b, path), 0);
  EXPECT_LT(CompareByField(unbound, b, path), 0);  // not set: first
  a.set_name("mws/10");
  b.set_name("mws/9");
  EXPECT_GT(CompareByField(a, b, *ParseFieldPath(d, "name")), 0);
}

TEST(Yaml, BlockStyleInJsonOrder) {
  EXPECT_EQ(*JsonToYaml(R"({"name": "mrs/1", "length": "4096", "lkey": 779, "ok": true, "access": ["LOCAL_WRITE"],
                            "source": {"file": {"path": "/dev/shm/x"}}, "none": [], "empty": {}, "items": [{"a": 1, "b": [2]}]})"),
            "name: mrs/1\n"
            "length: \"4096\"\n"
            "lkey: 779\n"
            "ok: true\n"
            "access:\n"
            "- LOCAL_WRITE\n"
            "source:\n"
            "  file:\n"
            "    path: /dev/shm/x\n"
            "none: []\n"
            "empty: {}\n"
            "items:\n"
            "- a: 1\n"
            "  b:\n"
            "  - 2\n");
}

TEST(Yaml, QuotesWhatYamlWouldReadAsSomethingElse) {
  EXPECT_EQ(*JsonToYaml(R"({"a": "", "b": "yes", "c": "1.5", "d": "x: y", "e": "-x", "f": "a\"b\n", "g": "NO", "h": "a #b"})"),
            "a: \"\"\nb: \"yes\"\nc: \"1.5\"\nd: \"x: y\"\ne: \"-x\"\nf: \"a\\\"b\\n\"\ng: \"NO\"\nh: \"a #b\"\n");
  EXPECT_FALSE(JsonToYaml("{").ok());
}

TEST(Table, NoHeaders) {
  Table t({"NAME", "LONG-HEADER"});
  t.AddRow({"pds/1", "x"});
  EXPECT_EQ(t.Render(), "NAME    LONG-HEADER\npds/1   x\n");
  EXPECT_EQ(t.Render(false), "pds/1   x\n");
}

TEST(Format, Yaml) { EXPECT_EQ(*ParseFormat("yaml"), Format::kYaml); }

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigFile, LoadsContextsWithTlsPathsFromTheFilesDirectory) {
  const std::string path = WriteTemp("config-ok", R"({"current-context": "lab", "contexts": [
      {"name": "lab", "server": "10.0.0.5:7470", "tls-ca": "ca.pem", "tls-cert": "/etc/me.pem", "tls-server-name": "rdmad.lab"},
      {"name": "local", "server": "unix:/run/rdmad/rdmad.sock"}]})");
  absl::StatusOr<ConfigFile> c = LoadConfig(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->current, "lab");
  ASSERT_EQ(c->contexts.size(), 2u);
  EXPECT_EQ(c->Find("lab")->tls_ca, ::testing::TempDir() + "/ca.pem");
  EXPECT_EQ(c->Find("lab")->tls_cert, "/etc/me.pem");
  EXPECT_EQ(c->Find("local")->server, "unix:/run/rdmad/rdmad.sock");
  EXPECT_EQ(c->Find("nope"), nullptr);
}

TEST(ConfigFile, MissingIsEmptyMalformedIsAnError) {
  absl::StatusOr<ConfigFile> none = LoadConfig(::testing::TempDir() + "/no-such-config");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->contexts.empty());
  EXPECT_FALSE(LoadConfig(WriteTemp("config-bad", "{")).ok());
  EXPECT_THAT(std::string(LoadConfig(WriteTemp("config-typo", R"({"contexts": [{"name": "a", "sever": "x"}]})")).status().message()),
              HasSubstr("unknown context field 'sever'"));
  EXPECT_FALSE(LoadConfig(WriteTemp("config-dup", R"({"contexts": [{"name": "a"}, {"name": "a"}]})")).ok());
  EXPECT_FALSE(LoadConfig(WriteTemp("config-noname", R"({"contexts": [{"server": "x"}]})")).ok());
}

TEST(ConfigFile, UseContextRewritesOnlyTheCurrentContext) {
  const std::string path = WriteTemp("config-use", R"({"contexts": [{"name": "a", "server": "x:1"}, {"name": "b"}]})");
  ASSERT_TRUE(UseContext(path, "b").ok());
  EXPECT_EQ(LoadConfig(path)->current, "b");
  EXPECT_EQ(LoadConfig(path)->Find("a")->server, "x:1");
  EXPECT_EQ(UseContext(path, "c").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadConfig(path)->current, "b");
}

TEST(ConfigFile, FlagsThenEnvironmentThenContextThenDefault) {
  EXPECT_EQ(Pick(std::string("flag"), "env", "ctx", "def"), "flag");
  EXPECT_EQ(Pick(std::string(""), "env", "ctx", "def"), "");  // a flag given empty is still the flag
  EXPECT_EQ(Pick(std::nullopt, "env", "ctx", "def"), "env");
  EXPECT_EQ(Pick(std::nullopt, "", "ctx", "def"), "ctx");
  EXPECT_EQ(Pick(std::nullopt, nullptr, "ctx", "def"), "ctx");
  EXPECT_EQ(Pick(std::nullopt, nullptr, "", "def"), "def");
}

TEST(ConfigFile, PathFromTheEnvironment) {
  setenv("RDMACTL_CONFIG", "/x/config", 1);
  EXPECT_EQ(ConfigPath(), "/x/config");
  unsetenv("RDMACTL_CONFIG");
  setenv("XDG_CONFIG_HOME", "/xdg", 1);
  EXPECT_EQ(ConfigPath(), "/xdg/rdmactl/config");
  unsetenv("XDG_CONFIG_HOME");
  setenv("HOME", "/home/op", 1);
  EXPECT_EQ(ConfigPath(), "/home/op/.config/rdmactl/config");
}

}  // namespace
}  // namespace rdmad::cli
