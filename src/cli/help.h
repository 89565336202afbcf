// What `gpudiag SUBCOMMAND --help` shows, and "did you mean" for options.
//
// HelpFormatter replaces CLI11's type noise in the option column
// ("UINT:SIZE [b, kb(=1024b), ...]:UINT in [4096 - 1099511627776]=256MiB")
// with one word a user reads: SIZE, N, SECONDS, FILE, the choices
// ("auto|nccl|host"), "[LEVEL]" for a value that may be left out. Ranges are
// left to the error message, which names them when a value falls outside.
// A default goes at the end of the description, as "(default: 32MiB)", so it
// never looks like a value already given. add_help_footer() adds each
// subcommand's Examples and Exit status blocks.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace gpudiag::cli {

/// No help line is wider than this (descriptions and footers are wrapped).
inline constexpr std::size_t kHelpWidth = 100;

class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter();
  std::string make_option_opts(const CLI::Option* opt) const override;
  std::string make_option_desc(const CLI::Option* opt) const override;
  std::string make_subcommand(const CLI::App* sub) const override;
  std::string make_description(const CLI::App* app) const override;
  std::string make_footer(const CLI::App* app) const override;
};

/// `text` with its lines longer than `width` broken at spaces (a word longer
/// than that stays whole), each piece after the first indented like its line
/// plus `hang` spaces; lines that fit and line breaks are kept as written.
std::string wrap_text(const std::string& text, std::size_t width, std::size_t hang);

/// The option column's word for `opt`'s value ("SIZE", "auto|nccl|host", ...);
/// empty for a flag.
std::string value_word(const CLI::Option* opt);

/// Adds the Examples and Exit status footer of the subcommand `sub` (by name).
void add_help_footer(CLI::App* sub);

/// "--bakend" -> "--backend" among `sub`'s options (and --help); empty when
/// nothing is close.
std::string suggest_option(const CLI::App* sub, const std::string& word);

}  // namespace gpudiag::cli
