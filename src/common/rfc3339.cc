#include "common/rfc3339.h"

namespace slotd {

namespace {

// The `width` decimal digits at `text[at]`; nullopt when any is not one.
std::optional<int> Digits(std::string_view text, size_t at, size_t width) {
  if (at + width > text.size()) return std::nullopt;
  int value = 0;
  for (size_t i = at; i < at + width; ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

bool IsLeapYear(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int DaysInMonth(int year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && IsLeapYear(year) ? 29 : kDays[month - 1];
}

// Days from 1970-01-01 to the proleptic Gregorian `year`-`month`-`day`
// (Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t year, int month, int day) {
  year -= month <= 2;
  const int64_t era = (year >= 0 ? year : year - 399) / 400;
  const int64_t year_of_era = year - era * 400;
  const int64_t day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

}  // namespace

std::optional<int64_t> ParseRfc3339Millis(std::string_view text) {
  // YYYY-MM-DDThh:mm:ss: 19 characters, separators in place.
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[13] != ':' || text[16] != ':') return std::nullopt;
  if (text[10] != 'T' && text[10] != 't' && text[10] != ' ') return std::nullopt;
  const std::optional<int> year = Digits(text, 0, 4), month = Digits(text, 5, 2), day = Digits(text, 8, 2),
                           hour = Digits(text, 11, 2), minute = Digits(text, 14, 2), second = Digits(text, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second) return std::nullopt;
  if (*month < 1 || *month > 12 || *day < 1 || *day > DaysInMonth(*year, *month) || *hour > 23 || *minute > 59 ||
      *second > 60)
    return std::nullopt;
  size_t at = 19;
  int millis = 0;
  if (text[at] == '.') {
    const size_t first = ++at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      if (at - first < 3) millis = millis * 10 + (text[at] - '0');
      ++at;
    }
    if (at == first) return std::nullopt;  // a '.' with no digit
    for (size_t digits = at - first; digits < 3; ++digits) millis *= 10;
  }
  int offset_minutes = 0;
  if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
    ++at;
  } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
    const int sign = text[at] == '-' ? -1 : 1;
    const std::optional<int> offset_hours = Digits(text, at + 1, 2), offset_mins = Digits(text, at + 4, 2);
    if (!offset_hours || !offset_mins || at + 3 >= text.size() || text[at + 3] != ':' || *offset_hours > 23 ||
        *offset_mins > 59)
      return std::nullopt;
    offset_minutes = sign * (*offset_hours * 60 + *offset_mins);
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != text.size()) return std::nullopt;
  // A leap second is the last moment of its minute.
  const int whole_seconds = *second == 60 ? 59 : *second;
  if (*second == 60) millis = 999;
  const int64_t seconds = DaysFromCivil(*year, *month, *day) * 86400 + *hour * 3600 + *minute * 60 + whole_seconds -
                          static_cast<int64_t>(offset_minutes) * 60;
  return seconds * 1000 + millis;
}

}  // namespace slotd
