// Table: plain-text columns for the CLI's read commands.
//
//   Table t({"ID", "NAME", "STATE"});
//   t.AddRow({"12", "sweep", "running"});
//   std::cout << t.Render();
//
//   ID  NAME   STATE
//   12  sweep  running
//
// Columns are padded to their widest cell (counted in UTF-8 code points);
// the last column is not padded. Missing cells are empty, extra cells are
// dropped.
//
// Thread safety: a plain value.
#ifndef DROVER_CLI_TABLE_H_
#define DROVER_CLI_TABLE_H_

#include <string>
#include <vector>

namespace drover::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers);

  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }

  // The header line and one line per row, each ending in '\n'.
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace drover::cli

#endif  // DROVER_CLI_TABLE_H_
