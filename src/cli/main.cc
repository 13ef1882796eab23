// aquifer: the operator's and user's command. See cli/commands.h for the command line.
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return aquifer::cli::RunCli(args, std::cout, std::cerr);
}
