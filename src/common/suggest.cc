#include "common/suggest.h"

#include <algorithm>

namespace drover {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string ClosestName(std::string_view word, const std::vector<std::string_view>& known) {
  if (word.size() > 64) return "";
  std::string_view best;
  size_t best_distance = 3;  // only one or two edits away
  for (std::string_view candidate : known) {
    const size_t d = EditDistance(word, candidate);
    if (d < best_distance && d < word.size()) {
      best_distance = d;
      best = candidate;
    }
  }
  return std::string(best);
}

}  // namespace drover
